package kafkaproto

import (
	"context"
	"time"
)

// defaultAdminTimeout bounds admin requests whose timeout is not positive.
const defaultAdminTimeout = 30 * time.Second

// adminContext derives the context of an admin request from its timeout.
func adminContext(ctx context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMillis) * time.Millisecond
	if d <= 0 {
		d = defaultAdminTimeout
	}
	return context.WithTimeout(ctx, d)
}
