package store_test

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// gate holds a writer's first flush in its Observe hook until opened, so
// that the calls made meanwhile queue behind it and go together in the
// next flush; it records the size of every flush.
type gate struct {
	mu    sync.Mutex
	sizes []int
	held  chan struct{} // closed when the first flush is held
	open  chan struct{}
}

func newGate() *gate { return &gate{held: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) observe(_ string, n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	first := len(g.sizes) == 1
	g.mu.Unlock()
	if first {
		close(g.held)
		<-g.open
	}
}

func (g *gate) flushes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// waitQueued waits until n goroutines of this test wait for their answers
// on a batcher: groupcommit waits only after it queued a call, so a flush
// taken after this carries all of them.
func waitQueued(t *testing.T, n int) {
	t.Helper()
	mine := "store_test." + t.Name() + ".func"
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		for {
			k := runtime.Stack(buf, true)
			if k < len(buf) {
				buf = buf[:k]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		waiting := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "groupcommit.(*Batcher[...]).wait(") && strings.Contains(g, mine) {
				waiting++
			}
		}
		return waiting == n
	}, 10*time.Second, 2*time.Millisecond, "%d calls queued", n)
}

// concurrently calls call(0) and holds its flush at g, then makes the other
// n-1 calls, each from its own goroutine, and lets the flush go once they
// are all queued: they go in the next flush together.
func concurrently(t *testing.T, g *gate, n int, call func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { call(0) })
	<-g.held
	for i := 1; i < n; i++ {
		wg.Go(func() { call(i) })
	}
	waitQueued(t, n)
	close(g.open)
	wg.Wait()
}

// settleScene sets up users whose entries settle each way settle.lua can,
// and returns the entries: each user's outcome does not depend on the order
// of the others'.
func settleScene(t *testing.T, r *store.Redis) []store.SettleEntry {
	t.Helper()
	ctx := context.Background()
	b := store.NewBalances(nil, r)
	c := r.Client(keys.DBAgentBilling)
	initAt := func(user, bal string, seq uint64) {
		_, err := b.Init(ctx, user, store.BalanceRead{Balance: dec(bal), Seq: seq})
		require.NoError(t, err)
	}
	charge := func(user, id, amount, ref string) {
		_, err := b.Deduct(ctx, store.DeductRequest{Username: user, ID: id, Amount: dec(amount), Now: time.UnixMilli(1700000000000), Ref: ref, RequestHash: "h"})
		require.NoError(t, err)
	}
	ded := func(user, id, amount string, seq uint64, ref string) store.SettleEntry {
		return store.SettleEntry{Username: user, Kind: store.SettleDeduction, EntryID: id, Amount: dec(amount), Seq: seq, Ref: ref, RequestHash: "h"}
	}
	initAt("ann", "10", 0) // two charges pending
	charge("ann", "a1", "3", "r1")
	charge("ann", "a2", "2", "r2")
	initAt("bob", "2", 0) // a deduction whose pending record Redis lost, larger than the balance
	initAt("cat", "5", 0) // a credit
	// dan has no balance: his entry waits for the initialisation
	require.NoError(t, c.Set(ctx, r.Keys().AgentBalance("eve"), "12abc", 0).Err()) // unreadable
	initAt("fay", "7", 5)                                                          // the initialisation read her entries up to 5
	initAt("gus", "4", 0)                                                          // settled before
	charge("gus", "g1", "1", "r3")
	_, err := b.Settle(ctx, ded("gus", "g1", "1", 1, "r3"))
	require.NoError(t, err)
	initAt("hal", "10", 0) // charged again after Redis forgot the first charge's marker
	charge("hal", "h1", "3", "r4")
	_, err = b.Settle(ctx, ded("hal", "h1", "3", 1, "r4"))
	require.NoError(t, err)
	require.NoError(t, c.Del(ctx, r.Keys().AgentDeduction("hal", "h1")).Err())
	charge("hal", "h1", "3", "r5")
	return []store.SettleEntry{
		ded("ann", "a1", "3", 1, "r1"),
		ded("ann", "a2", "2", 2, "r2"),
		ded("bob", "b1", "5", 1, "rb"),
		{Username: "cat", Kind: store.SettleCredit, EntryID: "c1", Amount: dec("4"), Seq: 1},
		ded("dan", "d1", "1", 1, "rd"),
		ded("eve", "e1", "1", 1, "re"),
		{Username: "fay", Kind: store.SettleCredit, EntryID: "f1", Amount: dec("2"), Seq: 3},
		ded("gus", "g1", "1", 1, "r3"),
		ded("hal", "h1", "3", 1, "r4"),
	}
}

func settleAnswer(r store.SettleResult) string {
	if r.Err != nil {
		return "error: " + r.Err.Error()
	}
	return fmt.Sprintf("%s uncovered=%s refunded=%s", r.Outcome, r.Uncovered.StringFixed(8), r.Refunded.StringFixed(8))
}

var epochMs = regexp.MustCompile(`\b1\d{12}\b`)

// billingState is every key of r's prefix in the billing database with its
// value, clock readings left out.
func billingState(t *testing.T, r *store.Redis) map[string]string {
	t.Helper()
	ctx := context.Background()
	c := r.Client(keys.DBAgentBilling)
	prefix := r.Keys().Prefix()
	out := map[string]string{}
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var v string
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			v = c.Get(ctx, k).Val()
		case "hash":
			h := c.HGetAll(ctx, k).Val()
			fields := make([]string, 0, len(h))
			for f, fv := range h {
				fields = append(fields, f+"="+fv)
			}
			sort.Strings(fields)
			v = strings.Join(fields, " ")
		default:
			v = typ
		}
		out[strings.TrimPrefix(k, prefix)] = epochMs.ReplaceAllString(v, "<ms>")
	}
	require.NoError(t, iter.Err())
	return out
}

// Deductions settled one a call from concurrent handlers share a pipeline,
// and each is answered, and Redis left, as Balances.Settle would.
func TestSettleWriterSharesAPipelineAndAnswersAsSettleDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, shared := storetest.Redis(t), storetest.Redis(t)
	entries := settleScene(t, direct)
	settleScene(t, shared)

	want, err := store.NewBalances(nil, direct).Settle(ctx, entries...)
	require.NoError(t, err)
	wantAnswers := make([]string, len(want))
	for i, r := range want {
		wantAnswers[i] = settleAnswer(r)
	}
	require.Equal(t, []string{
		"CLEARED uncovered=0.00000000 refunded=0.00000000",
		"CLEARED uncovered=0.00000000 refunded=0.00000000",
		"APPLIED uncovered=3.00000000 refunded=0.00000000",
		"APPLIED uncovered=0.00000000 refunded=0.00000000",
		"LATE uncovered=0.00000000 refunded=0.00000000",
		"error: store: settle e1 of eve: store: balance or amount malformed",
		"INCLUDED uncovered=0.00000000 refunded=0.00000000",
		"SETTLED uncovered=0.00000000 refunded=0.00000000",
		"REFUNDED uncovered=0.00000000 refunded=3.00000000",
	}, wantAnswers, "the scene settles every way")

	g := newGate()
	w := store.NewSettleWriter(shared, g.observe)
	defer w.Close()
	answers := make([]string, len(entries))
	concurrently(t, g, len(entries), func(i int) {
		out, err := w.Settle(ctx, entries[i])
		if answers[i] = fmt.Sprintf("call error: %v", err); err == nil {
			answers[i] = settleAnswer(out[0])
		}
	})
	require.Equal(t, []int{1, len(entries) - 1}, g.flushes(), "the calls queued behind the first went in one pipeline")
	require.Equal(t, wantAnswers, answers)
	require.Equal(t, billingState(t, direct), billingState(t, shared))

	// A call of several entries keeps their order, as Balances.Settle does:
	// the same entry twice is settled once.
	again := store.SettleEntry{Username: "cat", Kind: store.SettleCredit, EntryID: "c2", Amount: dec("1"), Seq: 2}
	out, err := w.Settle(ctx, again, again, entries[1])
	require.NoError(t, err)
	require.Equal(t, []string{store.SettleApplied, store.SettleSettled, store.SettleSettled}, []string{out[0].Outcome, out[1].Outcome, out[2].Outcome})
	require.Equal(t, []int{1, len(entries) - 1, 3}, g.flushes())
	require.Equal(t, "10.00000000", balance(t, shared, "cat"))
}

// An entry whose script Redis answers with an error gets that error as its
// own; the entries sharing its pipeline are settled and answered with what
// they did, not run again (which would answer SETTLED).
func TestSettleWriterKeepsAnEntrysErrorToItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := storetest.Redis(t)
	entries := settleScene(t, r)
	entries = slices.DeleteFunc(entries, func(e store.SettleEntry) bool { return e.Username == "eve" })
	_, err := store.NewBalances(nil, r).Init(ctx, "ivy", store.BalanceRead{Balance: dec("1")})
	require.NoError(t, err)
	require.NoError(t, r.Client(keys.DBAgentBilling).Set(ctx, r.Keys().AgentPending("ivy"), "not a hash", 0).Err())
	bad := store.SettleEntry{Username: "ivy", Kind: store.SettleDeduction, EntryID: "i1", Amount: dec("1"), Seq: 1}
	entries = append(entries[:3], append([]store.SettleEntry{bad}, entries[3:]...)...)

	// Balances.Settle fails the whole call for it (on a copy of the scene).
	other := storetest.Redis(t)
	settleScene(t, other)
	require.NoError(t, other.Client(keys.DBAgentBilling).Set(ctx, other.Keys().AgentPending("ivy"), "not a hash", 0).Err())
	_, err = store.NewBalances(nil, other).Settle(ctx, entries...)
	require.ErrorContains(t, err, "WRONGTYPE")

	g := newGate()
	w := store.NewSettleWriter(r, g.observe)
	defer w.Close()
	answers := make([]string, len(entries))
	concurrently(t, g, len(entries), func(i int) {
		out, err := w.Settle(ctx, entries[i])
		if answers[i] = fmt.Sprintf("call error: %v", err); err == nil { // an entry's failure is its own, not its call's
			answers[i] = settleAnswer(out[0])
		}
	})
	ivys := answers[3]
	answers[3] = "its own error"
	require.Equal(t, []string{
		"CLEARED uncovered=0.00000000 refunded=0.00000000",
		"CLEARED uncovered=0.00000000 refunded=0.00000000",
		"APPLIED uncovered=3.00000000 refunded=0.00000000",
		"its own error",
		"APPLIED uncovered=0.00000000 refunded=0.00000000",
		"LATE uncovered=0.00000000 refunded=0.00000000",
		"INCLUDED uncovered=0.00000000 refunded=0.00000000",
		"SETTLED uncovered=0.00000000 refunded=0.00000000",
		"REFUNDED uncovered=0.00000000 refunded=3.00000000",
	}, answers)
	require.True(t, strings.HasPrefix(ivys, "error: store: settle i1 of ivy: "), ivys)
	require.Contains(t, ivys, "WRONGTYPE")
	require.Equal(t, []int{1, len(entries) - 1}, g.flushes(), "the bad entry shared its pipeline")
}

// Two handlers settling the same deduction (its message delivered twice)
// may share a pipeline: settle.lua's settled marker makes the second run
// find it settled, so the balance moves once.
func TestSettleWriterSettlesAnEntryOnceWhenTwoCallsShareAPipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := storetest.Redis(t)
	b := store.NewBalances(nil, r)
	_, err := b.Init(ctx, "ann", store.BalanceRead{Balance: dec("10"), HotEntries: 0})
	require.NoError(t, err)
	_, err = b.Deduct(ctx, store.DeductRequest{Username: "ann", ID: "a1", Amount: dec("3"), Now: time.Now(), Ref: "r1"})
	require.NoError(t, err)
	_, err = b.Init(ctx, "bob", store.BalanceRead{Balance: dec("8")})
	require.NoError(t, err)
	cleared := store.SettleEntry{Username: "ann", Kind: store.SettleDeduction, EntryID: "a1", Amount: dec("3"), Seq: 1, Ref: "r1"}
	applied := store.SettleEntry{Username: "bob", Kind: store.SettleDeduction, EntryID: "b1", Amount: dec("5"), Seq: 1, Ref: "r2"}
	entries := []store.SettleEntry{
		{Username: "cat", Kind: store.SettleCredit, EntryID: "c1", Amount: dec("1"), Seq: 1}, // held first
		cleared, applied, cleared, applied,
	}

	g := newGate()
	w := store.NewSettleWriter(r, g.observe)
	defer w.Close()
	outcomes := make([]string, len(entries))
	concurrently(t, g, len(entries), func(i int) {
		out, err := w.Settle(ctx, entries[i])
		if outcomes[i] = fmt.Sprintf("call error: %v", err); err == nil {
			outcomes[i] = settleAnswer(out[0])
		}
	})
	require.Equal(t, []int{1, 4}, g.flushes(), "both copies of each entry in one pipeline")
	none := " uncovered=0.00000000 refunded=0.00000000"
	require.ElementsMatch(t, []string{store.SettleCleared + none, store.SettleSettled + none}, []string{outcomes[1], outcomes[3]})
	require.ElementsMatch(t, []string{store.SettleApplied + none, store.SettleSettled + none}, []string{outcomes[2], outcomes[4]})

	c := r.Client(keys.DBAgentBilling)
	require.Equal(t, "7.00000000", balance(t, r, "ann"), "the charge stays taken once")
	require.Equal(t, "3.00000000", balance(t, r, "bob"), "applied once")
	require.Zero(t, c.HLen(ctx, r.Keys().AgentPending("ann")).Val())
	for _, u := range []string{"ann", "bob"} {
		require.Equal(t, "1", c.Get(ctx, r.Keys().AgentBalanceEntries(u)).Val(), "%s's balance reflects one entry more", u)
	}
}

// Redis out of reach fails the calls of the pipelines that met it, as
// Balances.Settle fails its call; they are not run again one by one.
func TestSettleWriterFailsAPipelineThatCannotReachRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := storetest.Redis(t)
	proxy := storetest.NewProxy(t, storetest.RedisAddr())
	via, err := store.OpenRedis(store.RedisConfig{Addr: proxy.Addr(), KeyPrefix: r.Keys().Prefix()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = via.Close() })
	entries := make([]store.SettleEntry, 4)
	for i := range entries {
		entries[i] = store.SettleEntry{Username: fmt.Sprintf("u%d", i), Kind: store.SettleCredit, EntryID: "c", Amount: dec("1"), Seq: 1}
	}

	g := newGate()
	w := store.NewSettleWriter(via, g.observe)
	defer w.Close()
	proxy.Down()
	errs := make([]error, len(entries))
	concurrently(t, g, len(entries), func(i int) { _, errs[i] = w.Settle(ctx, entries[i]) })
	require.Equal(t, []int{1, len(entries) - 1}, g.flushes(), "each failed pipeline once")
	for i, err := range errs {
		require.ErrorContains(t, err, "store: settle: ", "call %d", i)
	}

	proxy.Up()
	require.Eventually(t, func() bool {
		out, err := w.Settle(ctx, entries[0])
		return err == nil && out[0].Err == nil
	}, 10*time.Second, 10*time.Millisecond, "settling again once Redis is back")
	late := r.Client(keys.DBAgentBilling).HGetAll(ctx, r.Keys().AgentBalanceLate("u0")).Val()
	require.Len(t, late, 1, "u0 has no balance: the credit waits for its initialisation")
}

// The writer's pipelined EVALSHA loads settle.lua after NOSCRIPT and goes
// again. Not parallel: SCRIPT FLUSH is server-wide.
func TestSettleWriterSurvivesScriptFlush(t *testing.T) {
	r := storetest.Redis(t)
	ctx := context.Background()
	w := store.NewSettleWriter(r, nil)
	defer w.Close()
	require.NoError(t, r.Client(keys.DBAgentBilling).ScriptFlush(ctx).Err())
	out, err := w.Settle(ctx, store.SettleEntry{Username: "jay", Kind: store.SettleCredit, EntryID: "c1", Amount: dec("1"), Seq: 1},
		store.SettleEntry{Username: "jay", Kind: store.SettleCredit, EntryID: "c2", Amount: dec("1"), Seq: 2})
	require.NoError(t, err)
	require.Equal(t, []string{store.SettleLate, store.SettleLate}, []string{out[0].Outcome, out[1].Outcome})
	require.NoError(t, out[0].Err)
	require.NoError(t, out[1].Err)
}

// Usages counted one a call from concurrent handlers share a pipeline; one
// whose hash Redis refuses fails alone, and the others are counted once, as
// UsageStats.IncrUsage counts them.
func TestUsageHashWriterSharesAPipelineAndCountsEachOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, shared := storetest.Redis(t), storetest.Redis(t)
	us := []store.Usage{
		{RequestID: "q0", Model: "m1", InputTokens: 1, OutputTokens: 2, CostMicroFen: 100},
		{RequestID: "q1", Model: "m1", InputTokens: 10, CachedTokens: 3, CostMicroFen: 1000},
		{RequestID: "q2", Model: "m2", ReasoningTokens: 7, CostMicroFen: 5},
		{RequestID: "q3", Model: "broken", InputTokens: 1},
		{RequestID: "q4", Model: "m2", OutputTokens: 4, CostMicroFen: 6},
		{RequestID: "q5", Model: "m3", InputTokens: 9},
	}
	require.NoError(t, shared.Client(keys.DBAgentPricing).Set(ctx, shared.Keys().AgentUsage("broken"), "not a hash", 0).Err())
	require.NoError(t, store.NewUsageStats(nil, direct).IncrUsage(ctx, slices.Concat(us[:3], us[4:])))

	g := newGate()
	w := store.NewUsageHashWriter(shared, g.observe)
	defer w.Close()
	errs := make([]error, len(us))
	concurrently(t, g, len(us), func(i int) { errs[i] = w.IncrUsage(ctx, us[i:i+1]) })
	for i, err := range errs {
		if us[i].Model == "broken" {
			require.ErrorContains(t, err, "WRONGTYPE")
			continue
		}
		require.NoError(t, err, us[i].RequestID)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		want := direct.Client(keys.DBAgentPricing).HGetAll(ctx, direct.Keys().AgentUsage(m)).Val()
		got := shared.Client(keys.DBAgentPricing).HGetAll(ctx, shared.Keys().AgentUsage(m)).Val()
		require.Equal(t, want, got, m)
	}
	require.Equal(t, "11", shared.Client(keys.DBAgentPricing).HGet(ctx, shared.Keys().AgentUsage("m1"), "inputTokens").Val())
	require.Equal(t, "2", shared.Client(keys.DBAgentPricing).HGet(ctx, shared.Keys().AgentUsage("m1"), "requestCount").Val())
	require.Equal(t, []int{1, len(us) - 1}, g.flushes(), "the calls queued behind the first went in one pipeline")
}

// pipelineCounter counts the HINCRBY and SADD commands of the pipelines a
// Redis client sends, by name.
type pipelineCounter struct {
	mu    sync.Mutex
	names map[string]int
}

func (c *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (c *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			if n := cmd.Name(); n == "hincrby" || n == "sadd" {
				c.names[n]++
			}
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// The usages of one model that share a pipeline add their sums to its
// hash in one command per field, counted as each one alone would be.
func TestUsageHashWriterSendsAModelsCommandsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, shared := storetest.Redis(t), storetest.Redis(t)
	us := []store.Usage{
		{RequestID: "q0", Model: "m1", InputTokens: 1, OutputTokens: 2, CostMicroFen: 100},
		{RequestID: "q1", Model: "m1", InputTokens: 10, CachedTokens: 3, CostMicroFen: 1000},
		{RequestID: "q2", Model: "m2", ReasoningTokens: 7, CostMicroFen: 5},
		{RequestID: "q3", Model: "m1", OutputTokens: 4, CostMicroFen: 6},
	}
	require.NoError(t, store.NewUsageStats(nil, direct).IncrUsage(ctx, us))
	sent := &pipelineCounter{names: map[string]int{}}
	shared.Client(keys.DBAgentPricing).AddHook(sent)
	w := store.NewUsageHashWriter(shared, nil)
	defer w.Close()
	require.NoError(t, w.IncrUsage(ctx, us))

	require.Equal(t, map[string]int{"hincrby": 12, "sadd": 2}, sent.names, "six fields and the set, once per model")
	for _, m := range []string{"m1", "m2"} {
		want := direct.Client(keys.DBAgentPricing).HGetAll(ctx, direct.Keys().AgentUsage(m)).Val()
		got := shared.Client(keys.DBAgentPricing).HGetAll(ctx, shared.Keys().AgentUsage(m)).Val()
		require.Equal(t, want, got, m)
	}
	require.Equal(t, "3", shared.Client(keys.DBAgentPricing).HGet(ctx, shared.Keys().AgentUsage("m1"), "requestCount").Val())
}
