module goprog

go 1.20
