package transfer

// refuse: a Windows puller refuses what Windows cannot hold as spelt (names.go).
func (g *nameGuard) refuse(name string) error { return g.windowsRefusal(name) }
