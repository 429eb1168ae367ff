package quorum

// The scheduler's tick claims run on the lock client's masters, with the
// same restart checks, through the lock client's Group. Package locking
// registers how to reach it, so that its public API shows no internal type.

var groupOf func(owner any) *Group

// RegisterOwner tells Of how to find the Group behind an owner (package
// locking registers its *Client at init).
func RegisterOwner(f func(owner any) *Group) { groupOf = f }

// Of returns the Group behind owner (a *locking.Client), or nil when owner
// has none.
func Of(owner any) *Group {
	if groupOf == nil {
		return nil
	}
	return groupOf(owner)
}
