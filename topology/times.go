package topology

import "time"

// OffsetDateTime is a Java OffsetDateTime: an instant with its UTC offset.
// The zero value is Java's null.
type OffsetDateTime struct{ time.Time }

// LocalDateTime is a Java LocalDateTime: a wall-clock time without a zone.
// Isle reads and writes it as UTC+8 wall time, the zone of the eIsland
// backend. The zero value is Java's null.
type LocalDateTime struct{ time.Time }
