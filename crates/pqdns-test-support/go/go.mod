module pqdns.test/tlsclient

go 1.25
