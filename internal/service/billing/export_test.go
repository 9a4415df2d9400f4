package billing

// SetSettling runs f between a charge that found the hot balance empty and
// its settle of the user's recharges: where the payment consumer's own
// settle may land.
func SetSettling(s *Service, f func()) { s.settling = f }
