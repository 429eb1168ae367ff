package config

import "strings"

// QueueName is the asynq queue of config queue q: the namespace, a colon,
// q. Deployments that share a Redis (staging and prod) never fetch or
// dedupe each other's tasks.
func (c *Config) QueueName(q string) string { return c.Namespace + ":" + q }

// QueueOf returns the config queue of asynq queue name (the inverse of
// QueueName), and whether name is one of this namespace's.
func (c *Config) QueueOf(name string) (string, bool) {
	return strings.CutPrefix(name, c.Namespace+":")
}
