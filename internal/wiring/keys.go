package wiring

import "github.com/batonhq/baton/config"

// LockPrefix is the prefix of the lock keys of cfg's namespace on the lock
// masters ("NS:lock:"): the lock client's prefix of every replica, and
// `baton lock`'s default under a config file.
func LockPrefix(cfg *config.Config) string { return cfg.Namespace + ":lock:" }
