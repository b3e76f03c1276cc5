module github.com/baton-dev/baton/bench/peers

go 1.26.8

require (
	github.com/baton-dev/baton v0.0.0
	github.com/jackc/pgx/v5 v5.13.0
	go.etcd.io/etcd/client/v3 v3.5.35
	go.uber.org/zap v1.17.0
)

require (
	github.com/coreos/go-semver v0.3.0 // indirect
	github.com/coreos/go-systemd/v22 v22.3.2 // indirect
	github.com/gogo/protobuf v1.3.2 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	go.etcd.io/etcd/api/v3 v3.5.35 // indirect
	go.etcd.io/etcd/client/pkg/v3 v3.5.35 // indirect
	go.uber.org/atomic v1.7.0 // indirect
	go.uber.org/multierr v1.6.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260803160001-6ac0973c030d // indirect
	google.golang.org/grpc v1.83.2 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The shared result schema and load generator (bench/result, bench/loadgen)
// and the process launcher (cmd/batond/cluster, for its port and GOMAXPROCS
// rules) come from the Baton module in this repository; of Baton's
// dependencies only the SDK's (through the launcher's status type) are
// built here.
replace github.com/baton-dev/baton => ../..
