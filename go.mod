module millrace

go 1.26
