package redistest

import (
	"fmt"
	"os"
	"os/exec"
)

// EnvBinary names the environment variable that, when set, overrides the
// redis-server binary used by [Binary].
const EnvBinary = "BATON_REDIS_SERVER"

// Binary returns the path of the redis-server executable to run: the value of
// $BATON_REDIS_SERVER if set, else redis-server from $PATH. The error explains
// how to install it.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("redistest: $%s=%q is not an executable redis-server: %w", EnvBinary, p, err)
		}
		return path, nil
	}
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redistest: redis-server not found on $PATH; install it "+
			"(apt-get install -y redis-server), set $%s to its path, or run `make test`: %w", EnvBinary, err)
	}
	return path, nil
}
