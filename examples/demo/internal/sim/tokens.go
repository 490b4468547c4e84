package sim

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/keyspace"
)

// TokenKey is one token series as the demo counts it: a request model and
// a token type, one of TokenTypes.
type TokenKey struct {
	Model, Type string
}

// TokenTypes are the token types the demo counts, in the order it prints
// them: input and output (gen_ai.client.token.usage by gen_ai.token.type)
// and their parts cache_read, cache_creation (the input tokens read from
// and written to the provider's cache) and reasoning (the output tokens
// spent on reasoning), each a counter of its own
// (gen_ai.client.inference.usage.cache_read.input_tokens, .cache_write.input_tokens,
// .reasoning.output_tokens).
var TokenTypes = []string{"input", "output", "cache_read", "cache_creation", "reasoning"}

// TokenTotal is the tokens committed for one TokenKey.
type TokenTotal struct {
	TokenKey
	Total uint64
}

// tokenCounter sums the tokens of the Usage events that the keyspace it
// wraps (the decorated one) committed, by model and every token type (a
// model whose calls report none of a type counts 0 of it, as the counters
// do): what otelstore records, counted independently, so the demo can say
// what each token series must sum to.
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
			for i, n := range []uint64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens,
				u.CacheCreationInputTokens, u.ReasoningOutputTokens} {
				c.totals[TokenKey{u.RequestModel, TokenTypes[i]}] += n
			}
		}
	}
	return head, nil
}

// Tokens returns the committed token totals by request model and type,
// ordered by model, then type in the order of TokenTypes.
func (s *Server) Tokens() []TokenTotal {
	s.tokens.mu.Lock()
	defer s.tokens.mu.Unlock()
	out := make([]TokenTotal, 0, len(s.tokens.totals))
	for k, v := range s.tokens.totals {
		out = append(out, TokenTotal{k, v})
	}
	slices.SortFunc(out, func(a, b TokenTotal) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(slices.Index(TokenTypes, a.Type), slices.Index(TokenTypes, b.Type)))
	})
	return out
}
