module example.com/touchstone-plugin-go

go 1.21
