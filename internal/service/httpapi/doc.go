// Package httpapi is the API platform every endpoint stands on (the API conventions: README, openapi.yaml):
// routing (chi), the JSON error model, request body limits, correlation ids
// in logs and messages, per-route metrics, HS256 JWT authentication with
// roles, the user-ban check (Bloom bitmap plus exact set, fail-open), rate
// limits (token bucket, fixed window, sliding window) answering 429 with
// Retry-After, timestamp+nonce replay protection, health and readiness, and
// the OpenAPI document, which a test holds against the routes really served.
//
// Endpoints are Routes: a method, a path, who may call it, its limits and a
// handler that returns an error; the platform turns errors into the model
// {"error":{"code","message"}} with the right status. routes.go lists every
// one. The domain services the handlers call (billing) come in through
// Backends, built by cmd/api.
package httpapi
