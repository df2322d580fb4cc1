package transfer

// oNoFollow: Windows has no O_NOFOLLOW; os.Root still refuses a link that leads out of the
// destination.
const oNoFollow = 0
