#!/usr/bin/env bash
# Checks a running test bed (up.sh STATE_DIR) with curl only: versions, server verification, CRDs served on both
# clusters, the NonAdminBackup schema bites, the agent identity gets exactly what deploy/rbac/ grants, the
# controller-manager deletes namespaces and collects garbage, MinIO has the bucket. Leaves nothing behind.
# Usage: smoke.sh STATE_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
set -a
# shellcheck disable=SC1091
. "$1/env"
set +a

failures=0
ok() { echo "ok    $*"; }
bad() { echo "FAIL  $*"; failures=$((failures + 1)); }

# req CLUSTER(A|B) IDENTITY(ADMIN|AGENT) METHOD PATH [BODY [CONTENT-TYPE]]: prints "<http code> <body>".
req() {
  local c="$1" who="$2" method="$3" path="$4" body="${5:-}" ctype="${6:-application/json}"
  local ca="FERRY_TESTBED_${c}_CA" cert="FERRY_TESTBED_${c}_${who}_CERT" key="FERRY_TESTBED_${c}_${who}_KEY"
  local server="FERRY_TESTBED_${c}_SERVER" args=()
  [ -n "$body" ] && args=(-H "Content-Type: $ctype" --data-binary "$body")
  curl -sS -w '\n%{http_code}' --cacert "${!ca}" --cert "${!cert}" --key "${!key}" -X "$method" "${args[@]}" \
    "${!server}$path" | awk '{ lines[NR] = $0 } END { printf "%s ", lines[NR]; for (i = 1; i < NR; i++) print lines[i] }'
}
# status CLUSTER IDENTITY METHOD PATH: the HTTP status code only.
status() { req "$@" | head -n 1 | cut -d' ' -f1; }
# expect CODE DESCRIPTION CLUSTER IDENTITY METHOD PATH [BODY [CONTENT-TYPE]]
expect() {
  local want="$1" what="$2" out code
  shift 2
  out="$(req "$@")"
  code="${out%% *}"
  if [ "$code" = "$want" ]; then ok "$what ($code)"; else bad "$what: want $want, got $code: $(echo "${out#* }" | head -c 600)"; fi
}

nab='{"apiVersion":"oadp.openshift.io/v1alpha1","kind":"NonAdminBackup","metadata":{"name":"%s"},"spec":%s}'
nabs=/apis/oadp.openshift.io/v1alpha1/namespaces/default/nonadminbackups

for c in A B; do
  out="$(req "$c" ADMIN GET /version)"
  case "$out" in *'"gitVersion": "v1.35.4"'*) ok "$c: /version is v1.35.4" ;; *) bad "$c: /version: $out" ;; esac
  expect 200 "$c: admin lists velero.io/v1 backups in velero" "$c" ADMIN GET /apis/velero.io/v1/namespaces/velero/backups
  expect 200 "$c: admin lists velero.io/v2alpha1 datauploads" "$c" ADMIN GET /apis/velero.io/v2alpha1/namespaces/velero/datauploads
  expect 200 "$c: admin lists NABs in default" "$c" ADMIN GET "$nabs"

  # The NAB schema: spec.backupSpec is Velero's BackupSpec; unknown fields are rejected under strict field
  # validation (kubectl's default, and what the apiserver does for ?fieldValidation=Strict) and pruned otherwise.
  # shellcheck disable=SC2059
  {
    expect 400 "$c: NAB with an unknown field in spec is rejected (fieldValidation=Strict)" "$c" ADMIN POST \
      "$nabs?fieldValidation=Strict" "$(printf "$nab" smoke-unknown '{"backupSpec":{},"bogus":1}')"
    expect 400 "$c: NAB with an unknown field in spec.backupSpec is rejected (fieldValidation=Strict)" "$c" ADMIN POST \
      "$nabs?fieldValidation=Strict" "$(printf "$nab" smoke-unknown2 '{"backupSpec":{"includedNamespace":["x"]}}')"
    expect 422 "$c: NAB with a wrongly typed backupSpec field is rejected" "$c" ADMIN POST \
      "$nabs" "$(printf "$nab" smoke-type '{"backupSpec":{"includedNamespaces":"x"}}')"
    expect 422 "$c: NAB without spec.backupSpec is rejected" "$c" ADMIN POST \
      "$nabs" "$(printf "$nab" smoke-nospec '{"deleteBackup":false}')"
    expect 201 "$c: well-formed NAB is accepted" "$c" ADMIN POST "$nabs?fieldValidation=Strict" \
      "$(printf "$nab" smoke-good '{"backupSpec":{"includedNamespaces":["x"]},"deleteBackup":false}')"
    out="$(req "$c" ADMIN PATCH "$nabs/smoke-apply?fieldManager=smoke" \
      "$(printf "$nab" smoke-apply '{"backupSpec":{},"bogus":1}')" application/apply-patch+yaml)"
    case "$out" in
      2*) bad "$c: server-side apply of a NAB with an unknown spec field succeeded: $out" ;;
      *'field not declared in schema'*) ok "$c: server-side apply of a NAB with an unknown spec field is rejected (${out%% *})" ;;
      *) bad "$c: server-side apply of a NAB with an unknown field: $out" ;;
    esac
    out="$(req "$c" ADMIN POST "$nabs" "$(printf "$nab" smoke-pruned '{"backupSpec":{},"bogus":1}')")"
    case "$out" in
      201*) if echo "$out" | grep -q bogus; then bad "$c: unknown spec field kept: $out"; else ok "$c: without fieldValidation an unknown spec field is pruned (201)"; fi ;;
      *) bad "$c: NAB with unknown field, default validation: $out" ;;
    esac
    out="$(req "$c" ADMIN PATCH "$nabs/smoke-good" '{"status":{"phase":"Created"}}' application/merge-patch+json)"
    case "$out" in *'"phase"'*) bad "$c: NAB status written through the main resource: $out" ;; 200*) ok "$c: NAB status is not written through the main resource (status subresource)" ;; *) bad "$c: patch NAB: $out" ;; esac
    expect 200 "$c: NAB status is written through /status" "$c" ADMIN PATCH "$nabs/smoke-good/status" \
      '{"status":{"phase":"Created","veleroBackup":{"name":"b","namespace":"velero","status":{"phase":"Completed"}}}}' application/merge-patch+json
    expect 422 "$c: NAB status phase outside the enum is rejected" "$c" ADMIN PATCH "$nabs/smoke-good/status" \
      '{"status":{"phase":"Done"}}' application/merge-patch+json
  }
  for n in smoke-good smoke-pruned; do req "$c" ADMIN DELETE "$nabs/$n" >/dev/null; done

  # The agent identity (user ferry-agent, no group) and deploy/rbac/.
  expect 200 "$c: agent lists backups in velero" "$c" AGENT GET /apis/velero.io/v1/namespaces/velero/backups
  expect 200 "$c: agent lists backups in all namespaces" "$c" AGENT GET /apis/velero.io/v1/backups
  expect 200 "$c: agent lists namespaces" "$c" AGENT GET /api/v1/namespaces
  expect 200 "$c: agent lists NABs" "$c" AGENT GET "$nabs"
  expect 403 "$c: agent cannot list secrets" "$c" AGENT GET /api/v1/namespaces/velero/secrets
  expect 403 "$c: agent cannot list pods" "$c" AGENT GET /api/v1/pods
  expect 403 "$c: agent cannot delete backups" "$c" AGENT DELETE /apis/velero.io/v1/namespaces/velero/backups/x
  expect 403 "$c: agent cannot write NAB status" "$c" AGENT PATCH "$nabs/x/status" '{}' application/merge-patch+json
  expect 201 "$c: agent creates a Backup" "$c" AGENT POST /apis/velero.io/v1/namespaces/velero/backups \
    '{"apiVersion":"velero.io/v1","kind":"Backup","metadata":{"name":"smoke"},"spec":{"includedNamespaces":["x"]},"status":{"phase":"Completed"}}'
  out="$(req "$c" ADMIN GET /apis/velero.io/v1/namespaces/velero/backups/smoke)"
  case "$out" in *'"phase": "Completed"'*) ok "$c: Backup keeps the status it was created with (no status subresource)" ;; *) bad "$c: Backup status: $out" ;; esac
  req "$c" ADMIN DELETE /apis/velero.io/v1/namespaces/velero/backups/smoke >/dev/null
  expect 201 "$c: agent creates an Event" "$c" AGENT POST /api/v1/namespaces/velero/events \
    '{"metadata":{"name":"smoke.1"},"involvedObject":{"apiVersion":"velero.io/v1","kind":"Backup","namespace":"velero","name":"smoke"},"reason":"Smoke","message":"smoke","type":"Normal"}'
  req "$c" ADMIN DELETE /api/v1/namespaces/velero/events/smoke.1 >/dev/null

  # Each cluster trusts only its own CA: the other cluster's admin certificate is refused.
  other=$([ "$c" = A ] && echo B || echo A)
  ca="FERRY_TESTBED_${c}_CA" cert="FERRY_TESTBED_${other}_ADMIN_CERT" key="FERRY_TESTBED_${other}_ADMIN_KEY" server="FERRY_TESTBED_${c}_SERVER"
  code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "${!ca}" --cert "${!cert}" --key "${!key}" "${!server}/api/v1/namespaces" || true)"
  if [ "$code" = 401 ]; then ok "$c: cluster $other's admin certificate is refused (401)"; else bad "$c: $other's admin cert got $code"; fi

  # kube-controller-manager: cluster-role aggregation, garbage collection, namespace deletion.
  out="$(req "$c" ADMIN GET /apis/rbac.authorization.k8s.io/v1/clusterroles/view)"
  case "$out" in *'"verbs"'*) ok "$c: aggregated ClusterRole view has rules" ;; *) bad "$c: view has no rules" ;; esac
  req "$c" ADMIN POST /api/v1/namespaces '{"metadata":{"name":"smoke-del"}}' >/dev/null
  owner="$(req "$c" ADMIN POST /api/v1/namespaces/smoke-del/configmaps '{"metadata":{"name":"owner"}}')"
  uid="$(echo "${owner#* }" | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["uid"])')"
  req "$c" ADMIN POST /api/v1/namespaces/smoke-del/configmaps \
    "{\"metadata\":{\"name\":\"dependent\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"owner\",\"uid\":\"$uid\"}]}}" >/dev/null
  req "$c" ADMIN POST /apis/velero.io/v1/namespaces/smoke-del/backups '{"metadata":{"name":"b"}}' >/dev/null
  req "$c" ADMIN DELETE /api/v1/namespaces/smoke-del/configmaps/owner >/dev/null
  start=$SECONDS
  until [ "$(status "$c" ADMIN GET /api/v1/namespaces/smoke-del/configmaps/dependent)" = 404 ]; do
    [ $((SECONDS - start)) -lt 60 ] || break
    sleep 0.5
  done
  if [ "$(status "$c" ADMIN GET /api/v1/namespaces/smoke-del/configmaps/dependent)" = 404 ]; then
    ok "$c: garbage collector removed the dependent ($((SECONDS - start)) s)"
  else
    bad "$c: dependent not collected in 60 s"
  fi
  req "$c" ADMIN DELETE /api/v1/namespaces/smoke-del >/dev/null
  start=$SECONDS
  until [ "$(status "$c" ADMIN GET /api/v1/namespaces/smoke-del)" = 404 ]; do
    [ $((SECONDS - start)) -lt 90 ] || break
    sleep 0.5
  done
  if [ "$(status "$c" ADMIN GET /api/v1/namespaces/smoke-del)" = 404 ]; then
    ok "$c: namespace deletion (with a Backup in it) completed ($((SECONDS - start)) s)"
  else
    bad "$c: namespace smoke-del still there after 90 s"
  fi
done

code="$(curl -s -o /dev/null -w '%{http_code}' -I --aws-sigv4 "aws:amz:$FERRY_TESTBED_S3_REGION:s3" \
  --user "$FERRY_TESTBED_S3_ACCESS_KEY:$FERRY_TESTBED_S3_SECRET_KEY" "$FERRY_TESTBED_S3_ENDPOINT/$FERRY_TESTBED_S3_BUCKET")"
if [ "$code" = 200 ]; then ok "MinIO: bucket $FERRY_TESTBED_S3_BUCKET exists"; else bad "MinIO: HEAD bucket: $code"; fi

if command -v kubectl >/dev/null; then
  if kubectl --kubeconfig "$FERRY_TESTBED_A_AGENT_KUBECONFIG" get backups.velero.io -n velero >/dev/null 2>&1 &&
    kubectl --kubeconfig "$FERRY_TESTBED_B_KUBECONFIG" get nab -A >/dev/null 2>&1; then
    ok "kubectl works with the agent and admin kubeconfigs"
  else
    bad "kubectl with the kubeconfigs"
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "smoke: $failures check(s) failed"
  exit 1
fi
echo "smoke: all checks passed"
