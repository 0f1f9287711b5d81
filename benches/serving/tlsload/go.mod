module pqdns/benches/serving/tlsload

go 1.25
