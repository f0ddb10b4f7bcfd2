#!/bin/sh
# A test exec credential plugin. Prints an ExecCredential and counts its runs in $COUNT_FILE.
#   COUNT_FILE        file holding the number of runs so far (required)
#   EXPIRE_SECONDS    expirationTimestamp = now + this (default 3600; "none" leaves it out)
#   TOKEN_PREFIX      the token is PREFIX-N for the Nth run (default exec-token)
#   CRED_API_VERSION  apiVersion to print (default client.authentication.k8s.io/v1)
#   CRED_MODE         "cert": print clientCertificateData/clientKeyData from CERT_FILE/KEY_FILE
#   INFO_FILE         where to copy $KUBERNETES_EXEC_INFO
#   FAIL              exit with this status instead
set -eu
n=$(( $(cat "$COUNT_FILE" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNT_FILE"
if [ -n "${INFO_FILE:-}" ]; then printf '%s' "${KUBERNETES_EXEC_INFO:-}" > "$INFO_FILE"; fi
if [ -n "${FAIL:-}" ]; then echo "plugin: cannot log in" >&2; exit "$FAIL"; fi
api=${CRED_API_VERSION:-client.authentication.k8s.io/v1}
exp=
if [ "${EXPIRE_SECONDS:-3600}" != none ]; then
	exp=$(date -u -d "@$(( $(date +%s) + ${EXPIRE_SECONDS:-3600} ))" +%Y-%m-%dT%H:%M:%SZ)
	exp=", \"expirationTimestamp\": \"$exp\""
fi
pem() { awk '{ printf "%s\\n", $0 }' "$1"; }
if [ "${CRED_MODE:-}" = cert ]; then
	printf '{"kind": "ExecCredential", "apiVersion": "%s", "status": {"clientCertificateData": "%s", "clientKeyData": "%s"%s}}\n' \
		"$api" "$(pem "$CERT_FILE")" "$(pem "$KEY_FILE")" "$exp"
else
	printf '{"kind": "ExecCredential", "apiVersion": "%s", "status": {"token": "%s-%s"%s}}\n' \
		"$api" "${TOKEN_PREFIX:-exec-token}" "$n" "$exp"
fi
