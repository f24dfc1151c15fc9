// Command loadtest measures the API under load on loopback, beside a
// baseline measured in the same run (`make bench-api`):
//
//   - POST /api/svc/v1/metrics with a 500-case body through the real server
//     and a real PostgreSQL, against a bare net/http handler that only reads
//     the same body and answers 200: throughput, p50 and p99 latency. A
//     third handler, which reads the body and runs json.Valid, shows what
//     merely looking at the JSON once costs.
//   - POST /api/svc/v1/sessions from many clients at once against a client
//     with fewer credits than requests: opens per second, and a check that
//     exactly the credits were spent, no more.
//   - POST /api/svc/v1/metrics through 1, 2 and 4 `evalmeter api` processes
//     (GOMAXPROCS=1 each) on one PostgreSQL, where the machine has a core
//     for each and one more.
//
// CPU per request is the load test's own process (server and load alike)
// for the in-process phases, and the API processes' for the replica phases;
// PostgreSQL's is reported beside it.
//
// Every request goes to 127.0.0.1; every loop is bounded in time and count.
// It exits 1 when a target of the API issue is missed.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/evalmeter/evalmeter/internal/credential"
	"github.com/evalmeter/evalmeter/internal/ledger"
	"github.com/evalmeter/evalmeter/internal/pgtest"
	"github.com/evalmeter/evalmeter/server"
)

// cpuProfile is where the metrics phase's CPU profile goes, if anywhere.
var cpuProfile string

var (
	maxConnsFlag  int
	forceReplicas bool
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each throughput phase runs")
	concurrency := flag.Int("concurrency", 32, "concurrent clients")
	vectors := flag.String("vectors", "internal/metrics/testdata/metrics-vectors.json", "test vectors holding the request body")
	vector := flag.String("vector", "random-20-n500-reordered", "the vector whose body is posted (500 cases, about 130 KB)")
	credits := flag.Int("credits", 2000, "credits of the client in the sessions phase")
	attempts := flag.Int("attempts", 2500, "session opens attempted in the sessions phase (more than -credits)")
	durable := flag.Bool("durable", true, "run PostgreSQL with fsync and synchronous commit on, as in production")
	replicaList := flag.String("replicas", "1,2,4", "API process counts of the replica phases; empty: none")
	flag.BoolVar(&forceReplicas, "force-replicas", false, "run the replica phases even where the machine lacks the cores")
	flag.IntVar(&maxConnsFlag, "db-max-conns", 5, "the API's PostgreSQL connections (the chart's database.maxConns)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the metrics phase (server and load) to this file")
	flag.Parse()
	defer pprof.StopCPUProfile()
	var replicaCounts []int
	for _, f := range strings.FieldsFunc(*replicaList, func(r rune) bool { return r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "loadtest: -replicas %q: want counts such as 1,2,4\n", *replicaList)
			os.Exit(2)
		}
		replicaCounts = append(replicaCounts, n)
	}
	missed, err := run(*duration, *concurrency, *vectors, *vector, *credits, *attempts, *durable, replicaCounts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	if missed {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(duration time.Duration, concurrency int, vectorsPath, vectorName string, credits, attempts int, durable bool, replicaCounts []int) (missed bool, err error) {
	body, err := loadBody(vectorsPath, vectorName)
	if err != nil {
		return false, err
	}
	ctx := context.Background()

	// A PostgreSQL of its own.
	dir, err := os.MkdirTemp("", "evalmeter-loadtest-")
	if err != nil {
		return false, err
	}
	os.Chmod(dir, 0o755)
	if durable {
		os.Setenv("EVALMETER_PG_DURABLE", "1")
	}
	cluster, err := pgtest.Start(dir)
	if err != nil {
		return false, err
	}
	defer cluster.Close()
	if err := ledger.Migrate(ctx, cluster.URL()); err != nil {
		return false, err
	}
	store, err := ledger.Open(ctx, cluster.URL()+os.Getenv("LOADTEST_URL_SUFFIX"), ledger.Options{Timeout: 5 * time.Second, MaxConns: int32(maxConnsFlag)})
	if err != nil {
		return false, err
	}
	defer store.Close()

	tokens, err := credential.NewTokenSigner([]byte(rand.Text() + rand.Text()))
	if err != nil {
		return false, err
	}
	srv, err := server.New(server.Config{
		Ledger: store, Tokens: tokens, Now: time.Now, Random: rand.Reader,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), // formatted, as in production, but not printed
	})
	if err != nil {
		return false, err
	}
	apiURL, stopAPI, err := serve(srv.Handler())
	if err != nil {
		return false, err
	}
	defer stopAPI()
	baselineURL, stopBaseline, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	if err != nil {
		return false, err
	}
	defer stopBaseline()
	// A reference between the two: read the body and check it is JSON, the
	// least any handler that looks at the body does.
	validURL, stopValid, err := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !json.Valid(b) {
			http.Error(w, "invalid", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	if err != nil {
		return false, err
	}
	defer stopValid()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}, Timeout: 30 * time.Second}
	key, err := grant(ctx, store, "load-metrics", 1)
	if err != nil {
		return false, err
	}
	token, err := openSession(client, apiURL, key, "load-session-0000001")
	if err != nil {
		return false, err
	}

	fmt.Printf("POST /api/svc/v1/metrics, %d-byte body, %d clients, %s per phase, PostgreSQL durable=%v, %d connections per API, %d CPUs\n\n",
		len(body), concurrency, duration, durable, maxConnsFlag, runtime.NumCPU())
	pgData := filepath.Join(dir, "data")
	base := load(duration, concurrency, cpuTime, nil, func(worker, n int) (int, error) {
		return post(client, baselineURL+"/", "", "", body)
	})
	valid := load(duration, concurrency, cpuTime, nil, func(worker, n int) (int, error) {
		return post(client, validURL+"/", "", "", body)
	})
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return false, err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
	}
	api := load(duration, concurrency, cpuTime, pgCPU(pgData), func(worker, n int) (int, error) {
		return post(client, apiURL+"/api/svc/v1/metrics", token, fmt.Sprintf("load-%03d-%09d", worker, n), body)
	})
	pprof.StopCPUProfile()
	fmt.Println(base.report("baseline: read body, 200"))
	fmt.Println(valid.report("reference: + json.Valid"))
	fmt.Println(api.report("evalmeter: POST metrics"))

	sess, err := sessions(ctx, store, client, apiURL, concurrency, credits, attempts)
	if err != nil {
		return false, err
	}

	var scaled []string
	if len(replicaCounts) > 0 {
		fmt.Println()
		bin, err := buildEvalmeter(dir)
		if err != nil {
			return false, err
		}
		for _, n := range replicaCounts {
			name := fmt.Sprintf("%d API process(es)", n)
			if !enoughCores(n) && !forceReplicas {
				fmt.Printf("%-28s not measured: %d processes at GOMAXPROCS=1 and PostgreSQL need %d CPUs, this machine has %d (-force-replicas runs it anyway)\n",
					name, n, n+1, runtime.NumCPU())
				continue
			}
			r, err := replicaPhase(ctx, bin, cluster.URL(), pgData, store, n, duration, concurrency, body)
			if err != nil {
				return false, err
			}
			fmt.Println(r.report(name))
			scaled = append(scaled, fmt.Sprintf("%d: %.0f req/s", n, r.throughput()))
		}
	}

	fmt.Println()
	check := func(what string, ok bool) {
		verdict := "met"
		if !ok {
			verdict, missed = "MISSED", true
		}
		fmt.Printf("%-70s %s\n", what, verdict)
	}
	fmt.Printf("%-70s %.0f%%\n", "reference (json.Valid only) throughput of the baseline", 100*valid.throughput()/base.throughput())
	check(fmt.Sprintf("metrics CPU/req %.3f ms, %.0f%% of the reference's %.3f ms (target ≤ 100%%)", ms(api.cpuPerRequest()),
		100*float64(api.cpuPerRequest())/float64(valid.cpuPerRequest()), ms(valid.cpuPerRequest())),
		api.cpuPerRequest() <= valid.cpuPerRequest())
	check(fmt.Sprintf("metrics throughput %.0f%% of the reference (target ≥ 100%%)", 100*api.throughput()/valid.throughput()),
		api.throughput() >= valid.throughput())
	fmt.Printf("%-70s p50 %.1f ms, p99 %.1f ms\n", "metrics latency", ms(api.percentile(50)), ms(api.percentile(99)))
	check(fmt.Sprintf("metrics requests failed: %d (target 0)", api.failed), api.failed == 0)
	check(fmt.Sprintf("session opens %.0f/s (target ≥ 1000/s)", sess.rate), sess.rate >= 1000)
	check(fmt.Sprintf("sessions: %d opened, %d refused, consumed %d of %d credits (target: exactly %d, no other status)",
		sess.opened, sess.refused, sess.consumed, credits, credits),
		sess.opened == credits && sess.consumed == credits && sess.refused == attempts-credits && sess.other == 0)
	if len(scaled) > 0 {
		fmt.Printf("%-70s %s\n", "metrics throughput by API processes", strings.Join(scaled, ", "))
	}
	return missed, nil
}

type sessionResult struct {
	opened, refused, other, consumed int
	rate                             float64 // opens per second
}

// sessions fires attempts session opens at a client with credits: every
// credit must be spent, none twice.
func sessions(ctx context.Context, store *ledger.Store, client *http.Client, apiURL string, concurrency, credits, attempts int) (sessionResult, error) {
	key, err := grant(ctx, store, "load-sessions", credits)
	if err != nil {
		return sessionResult{}, err
	}
	var next, opened, refused, other atomic.Int64
	var openedAt atomic.Int64 // nanoseconds since start when the last credit went
	start := time.Now()
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(attempts) {
					return
				}
				status, err := post(client, apiURL+"/api/svc/v1/sessions", key, fmt.Sprintf("load-session-%03d-%07d", w, n), nil)
				switch {
				case err == nil && status == http.StatusCreated:
					opened.Add(1)
					openedAt.Store(int64(time.Since(start)))
				case err == nil && status == http.StatusPaymentRequired:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	u, err := store.Usage(ctx, "load-sessions", time.Now())
	if err != nil {
		return sessionResult{}, err
	}
	r := sessionResult{opened: int(opened.Load()), refused: int(refused.Load()), other: int(other.Load()), consumed: u.ConsumedHours}
	r.rate = float64(r.opened) / time.Duration(openedAt.Load()).Seconds()
	fmt.Printf("%-28s %6d opened, %d refused (402), %d other, in %.2f s: %.0f opens/s\n",
		"evalmeter: POST sessions", r.opened, r.refused, r.other, time.Duration(openedAt.Load()).Seconds(), r.rate)
	return r, nil
}

// result is one throughput phase.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration
	failed    int
	cpu       time.Duration // CPU time of the server (and, in process, the load) during the phase
	dbCPU     time.Duration // PostgreSQL's, when measured
}

func (r result) cpuPerRequest() time.Duration { return r.perRequest(r.cpu) }

func (r result) perRequest(d time.Duration) time.Duration {
	if n := len(r.latencies) + r.failed; n > 0 {
		return d / time.Duration(n)
	}
	return 0
}

func (r result) throughput() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

func (r result) percentile(p int) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[(p*len(r.latencies)+99)/100-1]
}

func (r result) report(name string) string {
	db := ""
	if r.dbCPU > 0 {
		db = fmt.Sprintf(" + %5.3f ms PostgreSQL", ms(r.perRequest(r.dbCPU)))
	}
	return fmt.Sprintf("%-28s %8.0f req/s   p50 %6.2f ms   p99 %6.2f ms   %5.3f ms CPU/req%s   (%d requests, %d failed)",
		name, r.throughput(), ms(r.percentile(50)), ms(r.percentile(99)), ms(r.cpuPerRequest()), db, len(r.latencies), r.failed)
}

// load runs do from concurrency workers for duration, reading the server's
// CPU time with cpu and PostgreSQL's with dbCPU (nil: not measured).
func load(duration time.Duration, concurrency int, cpu, dbCPU func() time.Duration, do func(worker, n int) (int, error)) result {
	var mu sync.Mutex
	var r result
	deadline := time.Now().Add(duration)
	start := time.Now()
	cpuStart := cpu()
	var dbStart time.Duration
	if dbCPU != nil {
		dbStart = dbCPU()
	}
	var wg sync.WaitGroup
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			failed := 0
			for n := 0; time.Now().Before(deadline); n++ {
				t := time.Now()
				status, err := do(w, n)
				if err != nil || status != http.StatusOK {
					failed++
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			r.latencies = append(r.latencies, mine...)
			r.failed += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.cpu = cpu() - cpuStart
	if dbCPU != nil {
		r.dbCPU = dbCPU() - dbStart
	}
	slices.Sort(r.latencies)
	return r
}

func post(client *http.Client, url, bearer, idemKey string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func openSession(client *http.Client, apiURL, key, idemKey string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, apiURL+"/api/svc/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idemKey)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var env struct {
		Session struct{ Token string } `json:"session"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("opening a session: status %d, %v", resp.StatusCode, err)
	}
	return env.Session.Token, nil
}

func grant(ctx context.Context, store *ledger.Store, clientID string, hours int) (string, error) {
	if _, err := store.UpsertClient(ctx, ledger.Grant{ClientID: clientID, AllocatedHours: hours, Source: "loadtest"}, time.Now()); err != nil {
		return "", err
	}
	key, err := credential.NewAPIKey(rand.Reader)
	if err != nil {
		return "", err
	}
	hash, _ := credential.HashAPIKey(key)
	_, err = store.SetKey(ctx, clientID, hash, time.Now(), 0)
	return key, err
}

// serve runs h on a loopback port with the server settings of evalmeter api.
func serve(h http.Handler) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := server.HTTPServer(h, nil)
	go s.Serve(l)
	return "http://" + l.Addr().String(), func() { s.Close() }, nil
}

func loadBody(path, name string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Vectors []struct {
			Name string `json:"name"`
			Body string `json:"body"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return nil, err
	}
	for _, v := range file.Vectors {
		if v.Name == name {
			return []byte(v.Body), nil
		}
	}
	return nil, fmt.Errorf("no vector %q in %s", name, path)
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
