module github.com/aionotel/aionotel/keyspace/boltstore

go 1.26.0

require (
	github.com/aionotel/aionotel v0.1.0
	go.etcd.io/bbolt v1.4.3
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/aionotel/aionotel => ../..
