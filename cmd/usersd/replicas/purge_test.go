package replicas_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	usersv1 "usersd/gen/users/v1"
	"usersd/internal/apitest"
)

// TestThreeReplicasPurgeEachDeletedUserOnce runs three usersd processes on one PostgreSQL database
// with a short -deleted-retention, directly and through PgBouncer. Every replica runs the purger;
// each deleted user is still restorable before its purge time, and is purged soon after it exactly
// once: the feed shows one KIND_PURGED per user, and no replica finds the user afterwards.
func TestThreeReplicasPurgeEachDeletedUserOnce(t *testing.T) {
	t.Parallel() // mostly waits for the purge: see startProcess
	eachTopology(t, func(t *testing.T, db string, flags []string) {
		const retention = 2 * time.Second
		var replicas []*testServer
		for range 3 {
			_, s, _ := startProcess(t, db, append([]string{"-deleted-retention", retention.String()}, flags...)...)
			replicas = append(replicas, s)
		}
		watch := apitest.StartWatch(t, replicas[0].Server, apitest.WatchProtocols()[0], 0, "")

		const users = 12
		deletedAt := map[int32]time.Time{}
		for i := range users {
			s := replicas[i%len(replicas)]
			id := int32(apitest.IDOf(t, s.CreateUser(t, fmt.Sprintf("purged %d", i), "")))
			res := s.Do(t, apitest.HTTP1Client, request{Method: "DELETE", Path: fmt.Sprintf("/users/%d", id), Key: true})
			if res.Status != http.StatusNoContent {
				t.Fatalf("delete of user %d: %d %s", id, res.Status, res.Body)
			}
			deletedAt[id] = time.Now()
		}

		// Each user's purge comes once, within the retention plus the purger's interval (a quarter of
		// the retention, at least a second) plus a margin for a busy machine.
		purged := map[int32]int{}
		deadline := time.Now().Add(retention + 30*time.Second)
		for len(purged) < users && time.Now().Before(deadline) {
			e := watch.Next(t, time.Until(deadline))
			if e.GetKind() == usersv1.UserEvent_KIND_PURGED {
				id := e.GetUser().GetId()
				purged[id]++
				if early := deletedAt[id].Add(retention - time.Second); time.Now().Before(early) {
					t.Errorf("user %d was purged before its purge time", id)
				}
			}
		}
		if len(purged) != users {
			t.Fatalf("%d of %d deleted users were purged within %v of their purge time", len(purged), users, 30*time.Second)
		}
		// Later purges of the same user would come soon after the first: wait one interval more.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			select {
			case e := <-watch.Events:
				if e.GetKind() == usersv1.UserEvent_KIND_PURGED {
					purged[e.GetUser().GetId()]++
				}
			case <-time.After(time.Until(end)):
			}
		}
		for id, n := range purged {
			if n != 1 {
				t.Errorf("user %d was purged %d times", id, n)
			}
			for i, s := range replicas {
				res := s.Do(t, apitest.HTTP1Client, request{Method: "GET", Path: fmt.Sprintf("/users/%d?showDeleted=true", id), Key: true})
				if res.Status != http.StatusNotFound {
					t.Errorf("replica %d still finds purged user %d: %d %s", i, id, res.Status, res.Body)
				}
			}
		}
	})
}
