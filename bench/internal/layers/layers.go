// Package layers names the layer of usersd, or of a baseline, that a function of a profile
// belongs to (net/http, connect, each of usersd's middleware, the rules, the store, the codecs...),
// for the benchmark's tables of where a request's CPU and instructions go (bench/run --profile,
// bench/instructions --layers).
package layers

import "strings"

// rules name the layers by function-name prefix, in the order they are tried on each frame:
// the first that matches decides. usersd's middleware are named one by one, in the order
// handlers.withMiddleware wraps them.
var rules = []struct{ prefix, layer string }{
	{"usersd/handlers.withRequestContext", "usersd: request context"},
	{"usersd/handlers.withObservation", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.appendAccessLine", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.appendLogString", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.(*metrics)", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.recordCodes", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.endSpan", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.callerTrace", "usersd: observation (metrics, span, access log)"},
	{"github.com/prometheus/", "usersd: observation (metrics, span, access log)"},
	{"go.opentelemetry.io/", "usersd: observation (metrics, span, access log)"},
	{"log/slog", "usersd: observation (metrics, span, access log)"},
	{"usersd/handlers.withCORS", "usersd: CORS and security headers"},
	{"usersd/handlers.withSecurityHeaders", "usersd: CORS and security headers"},
	{"usersd/handlers.withRecover", "usersd: recover"},
	{"usersd/handlers.withChunkedRequestsClosing", "usersd: body limit"},
	{"usersd/handlers.withBodyLimit", "usersd: body limit"},
	{"usersd/handlers.withConnectGETChecks", "usersd: path and protocol checks"},
	{"usersd/handlers.withCleanPaths", "usersd: path and protocol checks"},
	{"usersd/handlers/apierror.WithProtocolDetails", "usersd: path and protocol checks"},
	{"usersd/handlers.answeredByConnect", "usersd: path and protocol checks"},
	{"usersd/auth.(*Limiter)", "usersd: rate limit"},
	{"golang.org/x/time/rate", "usersd: rate limit"},
	{"usersd/handlers.setRateHeaders", "usersd: rate limit"},
	{"usersd/auth", "usersd: auth"},
	{"usersd/handlers.(*authorizer)", "usersd: auth"},
	{"usersd/handlers.(*answerBudget)", "usersd: answer budget"},
	{"usersd/handlers.(*answerHold)", "usersd: answer budget"},
	{"usersd/handlers.spendAnswerBudget", "usersd: answer budget"},
	{"usersd/handlers.holdAnswer", "usersd: answer budget"},
	{"usersd/handlers.admitList", "usersd: answer budget"},
	{"usersd/handlers/apierror.Sanitize", "usersd: sanitize errors"},
	{"usersd/handlers/codec", "codec (JSON, protobuf)"},
	{"usersd/gen/users/v1/usersv1connect", "connect"},
	{"usersd/gen/", "codec (JSON, protobuf)"},
	{"usersd/handlers", "usersd: routes and REST handlers"},
	{"usersd/users", "usersd: rules (users.Service)"},
	{"usersd/warmstack", "usersd: warmstack"},
	{"modernc.org/libc.___syscall", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xfsync", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xfdatasync", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xpwrite", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xwrite", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xpread", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xread", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xfcntl", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xftruncate", "store: file system calls (SQLite's writes and syncs)"},
	{"modernc.org/libc.Xfstat", "store: file system calls (SQLite's writes and syncs)"},
	{"usersd/coalesce", "store"},
	{"usersd/store", "store"},
	{"modernc.org/", "store"},
	{"database/sql", "store"},
	{"github.com/jackc/", "store"},
	{"google.golang.org/protobuf", "codec (JSON, protobuf)"},
	{"encoding/json", "codec (JSON, protobuf)"},
	{"connectrpc.com/connect", "connect"},
	{"google.golang.org/grpc", "grpc-go"},
	{"golang.org/x/net/http2", "net/http: HTTP/2 server"},
	{"net/http/internal/http2", "net/http: HTTP/2 server"},
	{"net/http.(*http2", "net/http: HTTP/2 server"},
	{"net/http.http2", "net/http: HTTP/2 server"},
	{"net/http", "net/http: HTTP/1 server and shared code (headers, mux)"},
	{"net/textproto", "net/http: HTTP/1 server and shared code (headers, mux)"},
	{"internal/poll", "I/O system calls (network, and the access log's writes)"},
	{"net.", "I/O system calls (network, and the access log's writes)"},
	{"main.", "main packages (usersd's log writer and start-up, a baseline's handler)"},
}

// passedOver are the frames that never decide a layer: the runtime and the utilities every layer
// calls. A frame that is in neither list is a layer of its own, named by its package.
var passedOver = []string{
	"runtime.", "internal/", "sync", "strings.", "strconv.", "bytes.", "fmt.", "unicode", "errors.",
	"context.", "time.", "sort.", "slices.", "maps.", "math", "reflect.", "io.", "bufio.", "crypto/",
	"hash", "encoding/binary", "encoding/base64", "encoding/hex", "mime", "path", "net/url", "unique.",
	"iter.", "weak.", "container/", "cmp.", "os.", "log.", "vendor/", "unsafe.", "regexp",
	"syscall.", "golang.org/x/sys/", "golang.org/x/sync/", "golang.org/x/net/http/httpguts",
	"type:", "_", // the compiler's equality and hash functions, and the runtime's entry points
}

// Runtime is the layer of work that no layer asked for: a profile's sample with no frame in a
// layer, the Go runtime's own (GC, scheduler).
const Runtime = "Go runtime (GC, scheduler)"

// Of names the layer that one frame belongs to, or "" for a frame passed over.
func Of(function string) string {
	for _, r := range rules {
		if strings.HasPrefix(function, r.prefix) {
			return r.layer
		}
	}
	for _, p := range passedOver {
		if strings.HasPrefix(function, p) {
			return ""
		}
	}
	if !strings.Contains(function, ".") { // the runtime's assembly: memeqbody, gcWriteBarrier, gogo
		return ""
	}
	slash := strings.LastIndex(function, "/")
	if dot := strings.Index(function[slash+1:], "."); dot >= 0 {
		return "other: " + function[:slash+1+dot]
	}
	return "other: " + function
}

// runtimeParts split the instructions that the runtime spends itself into what they are for, in
// the order tried: the first prefix that matches decides.
var runtimeParts = []struct {
	part     string
	prefixes []string
}{
	{"Go runtime: stacks (growing and copying them, and walking them for growth and for GC scans)", []string{
		"runtime.newstack", "runtime.copystack", "runtime.morestack", "runtime.adjust", "runtime.(*stkframe)",
		"runtime.(*unwinder)", "runtime.pcvalue", "runtime.funcInfo", "runtime.findfunc", "runtime.step",
		"runtime.readvarint", "runtime.stackalloc", "runtime.stackfree", "runtime.stackcache",
		"runtime.getStackMap", "runtime.funcdata", "runtime.pcdatavalue", "runtime.(*moduledata)"}},
	{"Go runtime: garbage collection", []string{
		"runtime.gc", "runtime.scan", "runtime.greyobject", "runtime.(*gcWork)", "runtime.(*gcBits)",
		"runtime.findObject", "runtime.tryDeferToSpanScan", "runtime.(*spanInlineMarkBits)", "runtime.wbBuf",
		"runtime.gcWriteBarrier", "runtime.bulkBarrier", "runtime.typePointers", "runtime.(*mspan).typePointers",
		"runtime.markBits", "runtime.(*markBits)", "runtime.spanOf", "runtime.(*spanQueue)", "runtime.(*gcCPULimiterState)",
		"runtime.(*sweepLocked)", "runtime.sweepone", "runtime.(*sweepLocker)", "runtime.(*mspan).sweep", "gcWriteBarrier"}},
	{"Go runtime: allocation", []string{
		"runtime.mallocgc", "runtime.malloc", "runtime.(*mcache)", "runtime.(*mcentral)", "runtime.(*mheap)",
		"runtime.(*mspan)", "runtime.nextFreeFast", "runtime.newobject", "runtime.makeslice", "runtime.growslice",
		"runtime.memclrNoHeapPointers", "runtime.heapSetType", "runtime.makemap", "runtime.rawstring",
		"runtime.rawbyteslice", "runtime.concatstring", "runtime.slicebytetostring", "runtime.stringtoslicebyte",
		"runtime.newarray", "runtime.(*heapBits", "runtime.writeHeapBits", "runtime.(*pageAlloc)", "runtime.mProf"}},
	{"Go runtime: scheduler, locks, timers and system-call entry", []string{
		"runtime.schedule", "runtime.findRunnable", "runtime.park", "runtime.gopark", "runtime.goready",
		"runtime.ready", "runtime.runq", "runtime.execute", "runtime.mcall", "runtime.gogo", "runtime.netpoll",
		"runtime.newproc", "runtime.goexit", "runtime.casgstatus", "runtime.lock", "runtime.unlock",
		"runtime.futex", "runtime.note", "runtime.stealWork", "runtime.checkTimers", "runtime.(*timer",
		"runtime.nanotime", "runtime.entersyscall", "runtime.exitsyscall", "runtime.reentersyscall",
		"runtime.(*waitq)", "runtime.selectgo", "runtime.chan", "runtime.send", "runtime.recv", "runtime.gfget",
		"runtime.gfput", "runtime.malg", "runtime.resetspinning", "runtime.wakep", "runtime.startm",
		"runtime.stopm", "runtime.acquirep", "runtime.releasep", "runtime.handoffp", "runtime.(*pollDesc)",
		"runtime.poll_", "runtime.netpollblock", "runtime.netpollready", "runtime.goroutineReady",
		"runtime.dropg", "runtime.globrunq", "runtime.injectglist", "runtime.mPark", "runtime.sysmon",
		"runtime.usleep", "runtime.osyield", "runtime.procyield", "runtime.semacquire", "runtime.semrelease",
		"runtime.readyWithTime", "runtime.(*semaRoot)", "runtime.gosched", "runtime.goschedImpl", "gogo",
		"gosave_systemstack_switch", "runtime.systemstack", "runtime.mstart", "runtime.(*timers)"}},
}

// RuntimePart names what a function that Of passes over spends its instructions on, when it is the
// runtime's: stack growth, garbage collection, allocation or scheduling; "" for anything else.
func RuntimePart(function string) string {
	for _, p := range runtimeParts {
		for _, prefix := range p.prefixes {
			if strings.HasPrefix(function, prefix) {
				return p.part
			}
		}
	}
	return ""
}
