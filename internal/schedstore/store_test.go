package schedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// A schedule deleted and put again within the same millisecond of Redis's
// clock is not the schedule an ETag of the first one named: a put
// conditioned on the first one's version and created fails over it.
func TestPutOverAScheduleDeletedAndPutAgainInTheSameMillisecondFails(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	hourly := `{"handler":{"name":"h"},"schedule":"@hourly"}`
	daily := `{"handler":{"name":"h"},"schedule":"@daily"}`
	for i := range 20 {
		id := fmt.Sprintf("x-%d", i)
		k := st.keysOf(id)
		// put, delete and put again, one right after the other (the
		// scripts as Put and Delete run them)
		var first, again *redis.Cmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			first = p.Eval(ctx, putSrc, k.all(), id, hourly, LogLength, "", "")
			p.Eval(ctx, deleteSrc, append(k.all(), k.restored), id, LogLength)
			again = p.Eval(ctx, putSrc, k.all(), id, daily, LogLength, "", "")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := first.Int64Slice()
		b, _ := again.Int64Slice()
		if len(a) != 4 || len(b) != 4 || a[3] != 1 || b[3] != 1 {
			t.Fatalf("%s: puts answered %v and %v, want two first versions", id, a, b)
		}
		// the first one's ETag: version 1, its created
		read := Match{Version: a[3], Created: msTime(a[1])}
		if r, err := st.Put(ctx, id, json.RawMessage(`{"handler":{"name":"h"},"schedule":"@weekly"}`), read); !errors.Is(err, ErrChanged) {
			t.Fatalf("%s: a put over the deleted schedule's version 1 (created %d; the one put again: %d) succeeded over a schedule it never read: %+v %v",
				id, a[1], b[1], r, err)
		}
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
