#!/bin/sh
# Makes a throwaway CA, a server certificate for 127.0.0.1/localhost/kube.test, and client
# certificates (CN=alice, and CN=mallory from a CA the server does not trust) in DIR.
# Usage: gen-certs.sh DIR
set -eu
d=$1
mkdir -p "$d"
cd "$d"
ec() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
ec ca.key
openssl req -x509 -new -key ca.key -subj /CN=dlk-test-ca -days 2 -out ca.crt 2>/dev/null
ec server.key
openssl req -new -key server.key -subj /CN=kube-apiserver -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kube.test\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out server.crt -extfile server.ext 2>/dev/null
ec client.key
openssl req -new -key client.key -subj /CN=alice/O=dlk-users -out client.csr 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out client.crt -extfile client.ext 2>/dev/null
ec other-ca.key
openssl req -x509 -new -key other-ca.key -subj /CN=other-ca -days 2 -out other-ca.crt 2>/dev/null
ec rogue.key
openssl req -new -key rogue.key -subj /CN=mallory -out rogue.csr 2>/dev/null
openssl x509 -req -in rogue.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial -days 2 -out rogue.crt -extfile client.ext 2>/dev/null
rm -f ./*.csr ./*.ext ./*.srl
