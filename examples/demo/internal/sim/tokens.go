package sim

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/keyspace"
)

// TokenKey is one series of gen_ai.client.token.usage as the demo counts
// it: a request model and a token type ("input" or "output").
type TokenKey struct {
	Model, Type string
}

// TokenTotal is the tokens committed for one TokenKey.
type TokenTotal struct {
	TokenKey
	Total uint64
}

// tokenCounter sums the tokens of the Usage events that the keyspace it
// wraps (the decorated one) committed: what otelstore records, counted
// independently, so the demo can say what the token series must sum to.
type tokenCounter struct {
	keyspace.Store
	mu     sync.Mutex
	totals map[TokenKey]uint64
}

func (c *tokenCounter) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := c.Store.AppendEvents(ctx, expectedSeq, events)
	if err != nil {
		return head, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range events {
		if u, ok := ev.Content.(keyspace.Usage); ok && !ev.Ephemeral {
			c.totals[TokenKey{u.RequestModel, "input"}] += u.InputTokens
			c.totals[TokenKey{u.RequestModel, "output"}] += u.OutputTokens
		}
	}
	return head, nil
}

// Tokens returns the committed token totals by request model and type,
// ordered by model then type.
func (s *Server) Tokens() []TokenTotal {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	out := make([]TokenTotal, 0, len(s.tokens.totals))
	for k, v := range s.tokens.totals {
		out = append(out, TokenTotal{k, v})
	}
	slices.SortFunc(out, func(a, b TokenTotal) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Type, b.Type))
	})
	return out
}
