module coro-benches/go

go 1.19
