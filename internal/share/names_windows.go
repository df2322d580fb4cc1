package share

// checkNewName: a Windows owner refuses names Windows cannot hold as asked (refuseWindowsName).
func (s *Share) checkNewName(op, path, renamedFrom string) error {
	return s.refuseWindowsName(op, path, renamedFrom)
}
