package httpapi

import (
	"errors"
	"net/http"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/topology"
)

// Publish sends m through the messaging core with the request's correlation
// id as its trace id, and returns once the broker confirmed it. A record
// that fails its contract is a 400 naming the field; a broker that does not
// confirm within RABBITMQ_PUBLISH_TIMEOUT is a 503: the client retries, and
// nothing was silently dropped.
func (s *Server) Publish(r *http.Request, m topology.Message, o messaging.Options) error {
	if s.backends.Publisher == nil {
		return Unavailable("publish", errors.New("no publisher"))
	}
	if o.TraceID == "" {
		o.TraceID = correlation.RequestID(r.Context())
	}
	err := s.backends.Publisher.Publish(r.Context(), m, o)
	var fe *topology.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return BadRequest("%v", fe)
	default:
		return Unavailable("publish", err)
	}
}
