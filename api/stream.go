package api

import (
	"strconv"
	"strings"
)

// ParseEventID parses a Last-Event-ID value into partition → last delivered offset.
func ParseEventID(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, pair := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(strings.TrimSpace(pair), ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < -1 {
			return nil, &FieldError{Field: "header.Last-Event-ID", Err: ErrInvalidRequest,
				Msg: "must be partition:offset pairs separated by commas"}
		}
		out[int32(p)] = o
	}
	return out, nil
}

// FormatEventID formats the id of an event for partition first, then the
// others in the order of partitions.
func FormatEventID(first int32, partitions []int32, last map[int32]int64) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(first)) + ":" + strconv.FormatInt(last[first], 10))
	for _, p := range partitions {
		if p != first {
			b.WriteString("," + strconv.Itoa(int(p)) + ":" + strconv.FormatInt(last[p], 10))
		}
	}
	return b.String()
}
