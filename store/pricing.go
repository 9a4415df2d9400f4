package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrUnknownModel is returned for a model without an enabled pricing row.
var ErrUnknownModel = errors.New("store: no pricing for this model")

func unknownModel(model string) error { return fmt.Errorf("%w: %s", ErrUnknownModel, model) }

// Pricing is what one model costs, in fen per million tokens.
type Pricing struct {
	Model       string          `json:"modelName"`
	Input       decimal.Decimal `json:"inputFenPerMTok"`
	CachedInput decimal.Decimal `json:"cachedInputFenPerMTok"`
	Output      decimal.Decimal `json:"outputFenPerMTok"`
	Reasoning   decimal.Decimal `json:"reasoningFenPerMTok"`
	Enabled     bool            `json:"enabled"`
}

// MaxPriceFenPerMTok is the highest price Set takes, in fen per million
// tokens of any kind (100,000 yuan, some 200 times the dearest model's
// price today). At this price the largest request the API accepts, 2^31-1
// tokens of each of the four kinds, costs 85,899,345,880 fen, which is
// 8.59e18 micro-fen: the int64 costMicroFen of AgentUsageStatsMessage holds
// it. Any higher and such a request would not fit.
var MaxPriceFenPerMTok = decimal.New(1, 7)

// missingPricing is cached for a model without pricing, so unknown names
// cannot hammer MySQL (cache penetration); it expires soon. A change fences
// the key for fenceTTL: a reader that read the old row cannot write it back.
const (
	missingPricing    = "__NONE__"
	missingPricingTTL = time.Minute
	fencePrefix       = "__STALE__|"
	fenceTTL          = 2 * time.Minute
)

// pricingTTL is the Spring backend's 30 minutes, give or take 10%, so that entries
// written together do not expire together.
func pricingTTL() time.Duration {
	jitter := time.Duration(rand.Int64N(int64(keys.PricingCacheTTL / 5)))
	return keys.PricingCacheTTL - keys.PricingCacheTTL/10 + jitter
}

// Prices are the models' prices: the agent_model_pricing rows, read
// through the cache-aside keys agent:pricing:{model}.
type Prices struct {
	db *gorm.DB
	r  *Redis
}

// NewPrices returns the prices of db, cached in r.
func NewPrices(db *gorm.DB, r *Redis) *Prices { return &Prices{db: db, r: r} }

// Get returns a model's pricing through the cache-aside key
// agent:pricing:{model}. A Redis that does not answer is bypassed.
func (ps *Prices) Get(ctx context.Context, model string) (Pricing, error) {
	db, r := ps.db, ps.r
	key := r.Keys().AgentPricing(model)
	c := r.Client(keys.DBAgentPricing)
	if raw, err := c.Get(ctx, key).Result(); err == nil && !strings.HasPrefix(raw, fencePrefix) {
		if raw == missingPricing {
			return Pricing{}, unknownModel(model)
		}
		var p Pricing
		if json.Unmarshal([]byte(raw), &p) == nil {
			return p, nil
		}
	}
	var row ModelPricing
	err := db.WithContext(ctx).Where("model_name = ?", model).Take(&row).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return Pricing{}, fmt.Errorf("store: pricing of %s: %w", model, err)
	}
	if err != nil || !row.Enabled {
		// A disabled row is cached as missing at its own version, so the
		// fence its change left does not refuse the fill.
		var version int64
		if err == nil {
			version = row.UpdatedAt.UnixMicro()
		}
		_ = cacheFillScript.Run(ctx, c, []string{key}, missingPricing, version, missingPricingTTL.Milliseconds()).Err()
		return Pricing{}, unknownModel(model)
	}
	p := Pricing{Model: row.ModelName, Input: row.InputFenPerMTok, CachedInput: row.CachedInputFenPerMTok,
		Output: row.OutputFenPerMTok, Reasoning: row.ReasoningFenPerMTok, Enabled: row.Enabled}
	if raw, err := json.Marshal(p); err == nil {
		_ = cacheFillScript.Run(ctx, c, []string{key}, raw, row.UpdatedAt.UnixMicro(), pricingTTL().Milliseconds()).Err()
	}
	return p, nil
}

// Set writes a model's pricing row (each price 0..MaxPriceFenPerMTok), fences its cached copy — a request
// that read the old row just before cannot cache it again — and announces
// the change on agent:pricing-changes, so the API processes' in-process
// copies (PriceCache) are dropped at once.
func (ps *Prices) Set(ctx context.Context, p Pricing) error {
	db, r := ps.db, ps.r
	for _, v := range []decimal.Decimal{p.Input, p.CachedInput, p.Output, p.Reasoning} {
		if v.IsNegative() || v.Exponent() < -MoneyScale || v.GreaterThan(MaxPriceFenPerMTok) {
			return fmt.Errorf("store: pricing of %s: prices must be 0..%s fen per million tokens with at most 8 decimals",
				p.Model, MaxPriceFenPerMTok)
		}
	}
	if p.Model == "" || len(p.Model) > 128 {
		return errors.New("store: pricing: model name must be 1..128 bytes")
	}
	row := ModelPricing{ModelName: p.Model, InputFenPerMTok: p.Input, CachedInputFenPerMTok: p.CachedInput,
		OutputFenPerMTok: p.Output, ReasoningFenPerMTok: p.Reasoning, Enabled: p.Enabled}
	err := db.WithContext(ctx).Omit("id", "created_at", "updated_at").Clauses(clause.OnConflict{
		DoUpdates: clause.AssignmentColumns([]string{"input_fen_per_mtok", "cached_input_fen_per_mtok", "output_fen_per_mtok", "reasoning_fen_per_mtok", "enabled"}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("store: set pricing of %s: %w", p.Model, err)
	}
	var version time.Time
	if err := db.WithContext(ctx).Model(&ModelPricing{}).Where("model_name = ?", p.Model).Pluck("updated_at", &version).Error; err != nil {
		return fmt.Errorf("store: set pricing of %s: %w", p.Model, err)
	}
	fence := fencePrefix + strconv.FormatInt(version.UnixMicro(), 10)
	c := r.Client(keys.DBAgentPricing)
	if err := c.Set(ctx, r.Keys().AgentPricing(p.Model), fence, fenceTTL).Err(); err != nil {
		return fmt.Errorf("store: drop cached pricing of %s (it expires within %s): %w", p.Model, keys.PricingCacheTTL, err)
	}
	if err := c.Publish(ctx, r.Keys().AgentPricingChanges(), p.Model).Err(); err != nil {
		return fmt.Errorf("store: pricing of %s is set; announcing it failed, so API processes may charge the old price for up to %s: %w",
			p.Model, LocalPriceTTL, err)
	}
	return nil
}

// List returns every pricing row, by model name.
func (ps *Prices) List(ctx context.Context) ([]ModelPricing, error) {
	db := ps.db
	var rows []ModelPricing
	err := db.WithContext(ctx).Order("model_name").Find(&rows).Error
	return rows, err
}

// ModelPricing is a row of agent_model_pricing: fen per million tokens.
type ModelPricing struct {
	ID                    uint64          `gorm:"column:id;primaryKey"`
	ModelName             string          `gorm:"column:model_name"`
	InputFenPerMTok       decimal.Decimal `gorm:"column:input_fen_per_mtok;type:decimal(20,8)"`
	CachedInputFenPerMTok decimal.Decimal `gorm:"column:cached_input_fen_per_mtok;type:decimal(20,8)"`
	OutputFenPerMTok      decimal.Decimal `gorm:"column:output_fen_per_mtok;type:decimal(20,8)"`
	ReasoningFenPerMTok   decimal.Decimal `gorm:"column:reasoning_fen_per_mtok;type:decimal(20,8)"`
	Enabled               bool            `gorm:"column:enabled"`
	CreatedAt             time.Time       `gorm:"column:created_at"`
	UpdatedAt             time.Time       `gorm:"column:updated_at"`
}

// TableName is the table gorm maps ModelPricing to.
func (ModelPricing) TableName() string { return "agent_model_pricing" }
