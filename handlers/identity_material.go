package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// MaterialRecorder stores a passed verification's material in the identity
// store and sets identity_verification.material_info_url. The object's key
// derives from the user and the certification, so a message delivered twice
// writes the same object twice and the same URL (the row is written once).
type MaterialRecorder struct {
	ids   *store.Identities
	store objstore.Store
	log   *slog.Logger
}

// NewMaterialRecorder returns the identity-material consumer.
func NewMaterialRecorder(ids *store.Identities, s objstore.Store, log *slog.Logger) *MaterialRecorder {
	if ids == nil || s == nil || log == nil {
		panic("handlers: NewMaterialRecorder: nil dependency")
	}
	return &MaterialRecorder{ids: ids, store: s, log: log}
}

func identityMaterialConsumer(d Backends, log *slog.Logger) *MaterialRecorder {
	return NewMaterialRecorder(store.NewIdentities(d.DB, d.Redis), d.Buckets.Identity, log)
}

// MaterialKey is where a certification's material is stored: a digest of
// the user and the certification id, so no name a producer sends can make
// a bad key or point elsewhere.
func MaterialKey(username, certifyID string) string {
	sum := sha256.Sum256([]byte(username + "\x00" + certifyID))
	return "identity-material/" + hex.EncodeToString(sum[:]) + ".json"
}

// materialDoc is the JSON object stored: the provider's encrypted material
// with whose it is.
type materialDoc struct {
	Username     string `json:"username"`
	CertifyID    string `json:"certifyId"`
	MaterialInfo string `json:"materialInfo"`
}

// Handle stores m's material and records its URL. A message for a
// certification Isle does not have, or that names another user than the
// certification's, goes to the DLQ before anything is stored.
func (h *MaterialRecorder) Handle(ctx context.Context, m topology.IdentityMaterial) error {
	row, err := h.ids.Get(ctx, m.CertifyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return messaging.Permanent(fmt.Errorf("no identity verification %s: %w", m.CertifyID, err))
	case err != nil:
		return err
	case row.Username != m.Username:
		return messaging.Permanent(fmt.Errorf("identity verification %s is not %s's", m.CertifyID, m.Username))
	}
	body, err := json.Marshal(materialDoc{Username: m.Username, CertifyID: m.CertifyID, MaterialInfo: m.MaterialInfo})
	if err != nil {
		return messaging.Permanent(err)
	}
	key := MaterialKey(m.Username, m.CertifyID)
	if _, err := h.store.Put(ctx, key, bytes.NewReader(body), int64(len(body)), "application/json"); err != nil {
		if errors.Is(err, objstore.ErrTooLarge) {
			return messaging.Permanent(fmt.Errorf("material of %s: %w", m.CertifyID, err))
		}
		return fmt.Errorf("store material of %s: %w", m.CertifyID, err)
	}
	url := h.store.URL(key)
	err = h.ids.SetMaterialURL(ctx, m.CertifyID, url)
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return messaging.Permanent(fmt.Errorf("no identity verification %s: %w", m.CertifyID, err))
	}
	if err != nil {
		return err
	}
	h.log.InfoContext(ctx, "identity material stored", "certify_id", m.CertifyID, "url", url)
	return nil
}
