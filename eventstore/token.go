package eventstore

// WriteToken is the capability that proves a caller is the engine's
// recorder, the component allowed to write histories. Several goroutines or
// nodes may hold one and append to the same workflow: optimistic
// concurrency (the expected seq) decides between them. Only [RecorderToken] makes a valid one;
// the zero WriteToken{} is invalid and every write refuses it with
// [ErrInvalidToken], so a forgotten token fails loudly instead of writing.
type WriteToken struct {
	valid bool
}

// RecorderToken returns a valid WriteToken.
func RecorderToken() WriteToken { return WriteToken{valid: true} }

// Valid reports whether t came from [RecorderToken].
func (t WriteToken) Valid() bool { return t.valid }
