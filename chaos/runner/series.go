package runner

import "context"

// Series performs runs runs with seeds cfg.Seed, cfg.Seed+1, ... and
// returns their summary; each result is passed to each (if not nil) as it
// completes. It stops early when ctx ends. The summary keeps the results
// of failing runs only.
func Series(ctx context.Context, cfg Config, runs int, each func(*Result)) *Summary {
	s := NewSummary()
	for k := range runs {
		if ctx.Err() != nil {
			break
		}
		c := cfg
		c.Seed = cfg.Seed + int64(k)
		r := Run(ctx, c)
		s.Add(r)
		if each != nil {
			each(r)
		}
	}
	return s
}
