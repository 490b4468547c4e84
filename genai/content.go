package genai

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/internal/attrvalue"
)

// maxStructuredDepth bounds the nesting of a structured value: deeper JSON
// is kept as text.
const maxStructuredDepth = 32

// structured is captured tool arguments or output as an attribute value:
// a JSON object (the form the conventions expect) as a map value, with
// nested objects as maps, arrays as slices, numbers as int64 or float64,
// null members left out and every string cleaned as content is; anything
// else (text, a JSON scalar or array, JSON cut by MaxContentLen, nesting
// past maxStructuredDepth) as its cleaned text.
func structured(s string) attribute.Value {
	if len(s) <= MaxContentLen && strings.HasPrefix(strings.TrimSpace(s), "{") && json.Valid([]byte(s)) {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var v map[string]any
		if dec.Decode(&v) == nil {
			if val, ok := jsonValue(v, 0); ok {
				return val
			}
		}
	}
	return attribute.StringValue(content(s))
}

// jsonValue converts a decoded JSON value; ok is false past the depth
// bound or for a value JSON cannot hold.
func jsonValue(v any, depth int) (attribute.Value, bool) {
	if depth > maxStructuredDepth {
		return attribute.Value{}, false
	}
	switch v := v.(type) {
	case map[string]any:
		kvs := make([]attribute.KeyValue, 0, len(v))
		for k, member := range v {
			if member == nil {
				continue
			}
			val, ok := jsonValue(member, depth+1)
			if !ok {
				return attribute.Value{}, false
			}
			kvs = append(kvs, attribute.KeyValue{Key: attribute.Key(content(k)), Value: val})
		}
		return attribute.MapValue(kvs...), true
	case []any:
		vals := make([]attribute.Value, 0, len(v))
		for _, elem := range v {
			if elem == nil {
				vals = append(vals, attribute.StringValue(""))
				continue
			}
			val, ok := jsonValue(elem, depth+1)
			if !ok {
				return attribute.Value{}, false
			}
			vals = append(vals, val)
		}
		return attribute.SliceValue(vals...), true
	case string:
		return attribute.StringValue(content(v)), true
	case bool:
		return attribute.BoolValue(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return attribute.Int64Value(i), true
		}
		f, err := v.Float64()
		if err != nil {
			return attribute.StringValue(attrvalue.String(string(v))), true
		}
		return attribute.Float64Value(f), true
	}
	return attribute.Value{}, false
}
