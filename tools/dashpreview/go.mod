module github.com/redlock-go/redlock/tools/dashpreview

go 1.26.8
