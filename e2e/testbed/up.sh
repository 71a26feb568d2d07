#!/usr/bin/env bash
# Starts the two-cluster test bed on 127.0.0.1 and leaves it running: clusters `a` and `b` (each its own etcd,
# kube-apiserver with client-certificate authentication and RBAC, and kube-controller-manager running the
# namespace, garbage-collector and cluster-role-aggregation controllers) and one MinIO with a bucket. On both
# clusters it installs Velero's CRDs and the NonAdminBackup CRD (from build.sh), ferry's agent RBAC
# (deploy/rbac/, bound to user ferry-agent) and namespace `velero`.
#
# Usage: up.sh STATE_DIR    (STATE_DIR must not exist or be empty; stop with down.sh STATE_DIR)
#
# FERRY_TESTBED_PLAIN_VELERO="b" (a space-separated list of clusters) leaves OADP's CRDs off those clusters, as on
# a plain-Velero cluster; FERRY_TESTBED_CRDS_DIR in the env file has them for installing later.
#
# Writes STATE_DIR/env (sourceable: ports, kubeconfigs, certificates, MinIO endpoint, credentials and bucket),
# STATE_DIR/pids (what down.sh stops), STATE_DIR/{a,b}/{admin,agent}.kubeconfig, STATE_DIR/logs/*.log, and prints
# the env file's path on stdout once everything is ready. If anything fails or up.sh is interrupted, it stops
# what it started and removes STATE_DIR (FERRY_TESTBED_KEEP_FAILED=1 keeps the directory and its logs).
# Needs bash, curl (>= 7.75, for --aws-sigv4), openssl, python3 (standard library only) and setsid; not kubectl.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

[ $# -eq 1 ] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
if [ -e "$1" ] && [ -n "$(ls -A "$1" 2>/dev/null)" ]; then
  echo "up: $1 exists and is not empty (a running test bed? stop it with: $here/down.sh $1)" >&2
  exit 1
fi
mkdir -p "$1"
state="$(cd "$1" && pwd)"
t0=$SECONDS
log() { echo "up: [$((SECONDS - t0)) s] $*" >&2; }

# down.sh only ever removes a directory carrying this marker.
echo "ferry e2e test bed; stop with: $here/down.sh $state" >"$state/.ferry-testbed"
: >"$state/pids"
mkdir -p "$state/logs"

exec 3>&2 # for on_exit, which may run while a command's stderr is redirected
ready=0
helpers=() # background helpers (not daemons) to stop on failure
on_exit() {
  local rc=$?
  [ "$ready" = 1 ] && return
  exec >&3 2>&3
  echo "up: FAILED (exit $rc); stopping what was started" >&2
  local f j
  for j in "${helpers[@]}"; do kill -TERM "$j" 2>/dev/null || true; done # build.sh, setup steps
  for f in "$state"/logs/*.log; do
    [ -s "$f" ] || continue
    echo "---- last lines of $f" >&2
    tail -n 15 "$f" >&2
  done
  if [ "${FERRY_TESTBED_KEEP_FAILED:-}" = 1 ]; then
    "$here/down.sh" --keep "$state" >&2 || true
    echo "up: kept $state (FERRY_TESTBED_KEEP_FAILED=1)" >&2
  else
    "$here/down.sh" "$state" >&2 || true
  fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- parts (built once, cached) --------------------------------------------------------------------------------
# In the background so that a TERM to up.sh is handled at once (a trap waits for a foreground command).
"$here/build.sh" >"$state/parts" 3>&- &
helpers+=($!)
wait $!
# shellcheck disable=SC1091
. "$state/parts"
rm "$state/parts"
log "parts ready"

# --- ports --------------------------------------------------------------------------------------------------------
# Free ports below the kernel's ephemeral range, so that no outgoing connection of the test bed itself takes one
# of them between the choice and the bind; held all at once while choosing, so they are distinct.
# shellcheck disable=SC2034 # used through ${!name}
read -r etcd_a peer_a api_a etcd_b peer_b api_b s3_port s3_console < <(python3 - 8 <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
held = []
for candidate in random.sample(range(10000, max(low, 10000 + 4 * n)), 2000):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", candidate))
    except OSError:
        s.close()
        continue
    held.append(s)
    if len(held) == n:
        break
while len(held) < n:  # crowded range: let the kernel choose
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    held.append(s)
print(" ".join(str(s.getsockname()[1]) for s in held))
EOF
)
[ -n "$s3_console" ] || { echo "up: could not choose free ports" >&2; exit 1; }

# --- processes ----------------------------------------------------------------------------------------------------
# Each daemon runs in its own session and process group (setsid), detached from this shell and from its output
# (none of the caller's pipes stays open in a daemon, so `up.sh | ...` ends); STATE_DIR/pids gets
# "name pid start-time" so that down.sh stops exactly these processes (the start time guards against pid reuse).
start_daemon() { # name command...
  local name="$1"
  shift
  setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null 3>&- &
  local pid=$!
  echo "$name $pid $(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f20)" >>"$state/pids"
}
alive() { # name
  local pid
  pid="$(awk -v n="$1" '$1 == n { print $2 }' "$state/pids")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
# wait_for NAME TIMEOUT_S COMMAND...: retries COMMAND every 0.2 s while process NAME is alive.
wait_for() {
  local name="$1" timeout="$2" deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    alive "$name" || { echo "up: $name exited; see $state/logs/$name.log" >&2; return 1; }
    [ "$SECONDS" -lt "$deadline" ] || { echo "up: $name not ready after $timeout s" >&2; return 1; }
    sleep 0.2
  done
}

# etcd and MinIO need no certificates: they start while the certificates are made.
for c in a b; do
  client_var="etcd_$c" peer_var="peer_$c"
  mkdir -p "$state/$c"
  mkdir -m 700 "$state/$c/etcd"
  start_daemon "etcd-$c" "$FERRY_TESTBED_ETCD" --name "$c" --data-dir "$state/$c/etcd" \
    --listen-client-urls "http://127.0.0.1:${!client_var}" --advertise-client-urls "http://127.0.0.1:${!client_var}" \
    --listen-peer-urls "http://127.0.0.1:${!peer_var}" --initial-advertise-peer-urls "http://127.0.0.1:${!peer_var}" \
    --initial-cluster "$c=http://127.0.0.1:${!peer_var}" --log-level warn --unsafe-no-fsync
done
s3_access_key=ferry-testbed
s3_secret_key=ferry-testbed-secret
s3_region=us-east-1
s3_bucket=ferry
mkdir -p "$state/minio"
MINIO_ROOT_USER="$s3_access_key" MINIO_ROOT_PASSWORD="$s3_secret_key" MINIO_UPDATE=off MINIO_BROWSER=off \
  start_daemon minio "$FERRY_TESTBED_MINIO" server "$state/minio" \
  --address "127.0.0.1:$s3_port" --console-address "127.0.0.1:$s3_console"

# --- certificates -------------------------------------------------------------------------------------------------
# Per cluster: a CA, the apiserver's serving certificate (IP SAN 127.0.0.1), client certificates for the admin
# (O=system:masters) and the agent (CN=ferry-agent, no group), and the service-account signing key pair. All X.509
# v3 (rustls rejects v1), ECDSA P-256, keys in PKCS#8.
cat >"$state/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1, DNS:localhost, IP:10.96.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF

make_pki() { # cluster
  local c="$1" pki="$state/$1/pki" cnf="$state/openssl.cnf"
  mkdir -p "$pki"
  cd "$pki"
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 3650 \
    -subj "/CN=ferry-testbed-$c-ca" -config "$cnf" -extensions ca -keyout ca.key -out ca.crt 2>/dev/null
  local name subj ext
  for spec in "apiserver|/CN=kube-apiserver|server" "admin|/O=system:masters/CN=ferry-testbed-admin|client" \
    "agent|/CN=ferry-agent|client"; do
    IFS='|' read -r name subj ext <<<"$spec"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -subj "$subj" -config "$cnf" \
      -keyout "$name.key" -out "$name.csr" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
      -days 3650 -extfile "$cnf" -extensions "$ext" -out "$name.crt" 2>/dev/null
    rm "$name.csr"
  done
  openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:prime256v1 -out sa.key 2>/dev/null
  openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  chmod 600 ./*.key
}
make_pki a &
pki_a=$!
make_pki b &
pki_b=$!
wait "$pki_a"
wait "$pki_b"

b64() { base64 <"$1" | tr -d '\n'; }
kubeconfig() { # cluster user port
  local c="$1" user="$2" pki="$state/$1/pki"
  cat >"$state/$c/$user.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: ferry-testbed-$c
    cluster:
      server: https://127.0.0.1:$3
      certificate-authority-data: $(b64 "$pki/ca.crt")
users:
  - name: ferry-testbed-$c-$user
    user:
      client-certificate-data: $(b64 "$pki/$user.crt")
      client-key-data: $(b64 "$pki/$user.key")
contexts:
  - name: ferry-testbed-$c-$user
    context:
      cluster: ferry-testbed-$c
      user: ferry-testbed-$c-$user
current-context: ferry-testbed-$c-$user
EOF
  chmod 600 "$state/$c/$user.kubeconfig"
}
for c in a b; do
  port_var="api_$c"
  kubeconfig "$c" admin "${!port_var}"
  kubeconfig "$c" agent "${!port_var}"
done
log "certificates and kubeconfigs written"

# kube-apiserver retries etcd until it answers, so it need not wait for etcd's /health here.
for c in a b; do
  pki="$state/$c/pki" client_var="etcd_$c" port_var="api_$c"
  start_daemon "kube-apiserver-$c" "$FERRY_TESTBED_KUBE_APISERVER" \
    --etcd-servers "http://127.0.0.1:${!client_var}" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${!port_var}" \
    --cert-dir "$state/$c/apiserver" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/24 --endpoint-reconciler-type none --profiling=false
done
for c in a b; do
  client_var="etcd_$c"
  wait_for "etcd-$c" 30 curl -sf "http://127.0.0.1:${!client_var}/health"
done
log "etcd ready"


# readyz CLUSTER: 0 once /readyz answers 200.
readyz() {
  local pki="$state/$1/pki" port_var="api_$1"
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://127.0.0.1:${!port_var}/readyz"
}
for c in a b; do wait_for "kube-apiserver-$c" 90 readyz "$c"; done
log "kube-apiservers ready"


# apply CLUSTER API-PATH FILE: server-side apply of one object (YAML) as admin; fails with the body on an error.
apply() {
  local c="$1" path="$2" file="$3" pki="$state/$1/pki" port_var="api_$1" out code
  out="$(mktemp "$state/logs/.apply.XXXXXX")"
  code="$(curl -sS -o "$out" -w '%{http_code}' --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary "@$file" \
    "https://127.0.0.1:${!port_var}$path?fieldManager=ferry-testbed&force=true")"
  if [ "$code" != 200 ] && [ "$code" != 201 ]; then
    echo "up: cluster $c: apply $file to $path: HTTP $code: $(head -c 2000 "$out")" >&2
    rm -f "$out"
    return 1
  fi
  rm -f "$out"
}
# api_path FILE: the REST path of the object in a one-object YAML file, from its kind, name (and namespace).
api_path() {
  local kind name ns
  kind="$(sed -n 's/^kind:[[:space:]]*\([A-Za-z]*\).*/\1/p' "$1")"
  name="$(awk '/^metadata:/ { m = 1; next } m && /^[^[:space:]#]/ { m = 0 } m && $1 == "name:" { print $2; exit }' "$1")"
  ns="$(awk '/^metadata:/ { m = 1; next } m && /^[^[:space:]#]/ { m = 0 } m && $1 == "namespace:" { print $2; exit }' "$1")"
  case "$kind" in
    Role) echo "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/roles/$name" ;;
    RoleBinding) echo "/apis/rbac.authorization.k8s.io/v1/namespaces/$ns/rolebindings/$name" ;;
    ClusterRole) echo "/apis/rbac.authorization.k8s.io/v1/clusterroles/$name" ;;
    ClusterRoleBinding) echo "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/$name" ;;
    CustomResourceDefinition) echo "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$name" ;;
    Namespace) echo "/api/v1/namespaces/$name" ;;
    *) echo "up: $1: kind '$kind' is not supported here" >&2; return 1 ;;
  esac
}

rbac_files=(agent-clusterrole.yaml agent-clusterrolebinding.yaml agent-restore-clusterrole.yaml agent-restore-clusterrolebinding.yaml)
rbac_namespaced_files=(agent-role.yaml agent-rolebinding.yaml) # need namespace velero
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: velero\n' >"$state/namespace-velero.yaml"
# crd_files CLUSTER: the CRD files that cluster gets (OADP's are left off a plain-Velero cluster).
crd_files() {
  local f
  for f in "$FERRY_TESTBED_CRDS_DIR"/*.yaml; do
    case " ${FERRY_TESTBED_PLAIN_VELERO:-} " in
      *" $1 "*) case "$(basename "$f")" in *.oadp.openshift.io.yaml) continue ;; esac ;;
    esac
    echo "$f"
  done
}

# established CLUSTER: 0 once every CRD of that cluster is Established.
established() {
  local crd_names=() f
  while read -r f; do crd_names+=("$(basename "$f" .yaml)"); done < <(crd_files "$1")
  local pki="$state/$1/pki" port_var="api_$1"
  curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:${!port_var}/apis/apiextensions.k8s.io/v1/customresourcedefinitions" |
    python3 -c '
import json, sys
want = set(sys.argv[1:])
for crd in json.load(sys.stdin)["items"]:
    conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions") or []}
    if conds.get("Established") == "True":
        want.discard(crd["metadata"]["name"])
sys.exit(1 if want else 0)' "${crd_names[@]}"
}
# agent_sees_backups CLUSTER: 0 once the agent identity can list Velero Backups in namespace velero.
agent_sees_backups() {
  local pki="$state/$1/pki" port_var="api_$1"
  curl -sf -o /dev/null --cacert "$pki/ca.crt" --cert "$pki/agent.crt" --key "$pki/agent.key" \
    "https://127.0.0.1:${!port_var}/apis/velero.io/v1/namespaces/velero/backups"
}

setup_cluster() { # cluster
  local c="$1" f pids=() p crds=()
  while read -r f; do crds+=("$f"); done < <(crd_files "$c")
  for f in "${crds[@]}" "${rbac_files[@]/#/$repo/deploy/rbac/}" "$state/namespace-velero.yaml"; do
    apply "$c" "$(api_path "$f")" "$f" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for f in "${rbac_namespaced_files[@]/#/$repo/deploy/rbac/}"; do apply "$c" "$(api_path "$f")" "$f"; done
  wait_for "kube-apiserver-$c" 60 established "$c"
  wait_for "kube-apiserver-$c" 30 agent_sees_backups "$c"
}
setup_cluster a &
setup_a=$!
setup_cluster b &
setup_b=$!
helpers+=("$setup_a" "$setup_b")
wait "$setup_a"
wait "$setup_b"
log "CRDs established, RBAC and namespace velero applied on a and b"

# After the CRDs: the garbage collector and namespace controllers discover them on their first sync.
for c in a b; do
  start_daemon "kube-controller-manager-$c" "$FERRY_TESTBED_KUBE_CONTROLLER_MANAGER" \
    --kubeconfig "$state/$c/admin.kubeconfig" --controllers namespace,garbagecollector,clusterrole-aggregation \
    --use-service-account-credentials=false --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false
done

# MinIO: live, then the bucket (SigV4 PUT; 409 BucketAlreadyOwnedByYou would mean it exists).
wait_for minio 60 curl -sf "http://127.0.0.1:$s3_port/minio/health/live"
make_bucket() {
  local code
  code="$(curl -sS -o "$state/logs/.bucket" -w '%{http_code}' --aws-sigv4 "aws:amz:$s3_region:s3" \
    --user "$s3_access_key:$s3_secret_key" -X PUT "http://127.0.0.1:$s3_port/$s3_bucket")"
  [ "$code" = 200 ] || [ "$code" = 409 ]
}
wait_for minio 30 make_bucket
rm -f "$state/logs/.bucket"
log "MinIO ready, bucket $s3_bucket created"

for name in kube-controller-manager-a kube-controller-manager-b; do
  alive "$name" || { echo "up: $name exited; see $state/logs/$name.log" >&2; exit 1; }
done

q() { printf '%q' "$1"; }
{
  echo "# ferry e2e test bed (e2e/testbed/up.sh); stop with: $(q "$here/down.sh") $(q "$state")"
  echo "FERRY_TESTBED_STATE=$(q "$state")"
  for c in a b; do
    C="$(echo "$c" | tr '[:lower:]' '[:upper:]')" pki="$state/$c/pki" port_var="api_$c" etcd_var="etcd_$c"
    echo "FERRY_TESTBED_${C}_SERVER=https://127.0.0.1:${!port_var}"
    echo "FERRY_TESTBED_${C}_APISERVER_PORT=${!port_var}"
    echo "FERRY_TESTBED_${C}_ETCD_PORT=${!etcd_var}"
    echo "FERRY_TESTBED_${C}_KUBECONFIG=$(q "$state/$c/admin.kubeconfig")"
    echo "FERRY_TESTBED_${C}_AGENT_KUBECONFIG=$(q "$state/$c/agent.kubeconfig")"
    echo "FERRY_TESTBED_${C}_CA=$(q "$pki/ca.crt")"
    echo "FERRY_TESTBED_${C}_ADMIN_CERT=$(q "$pki/admin.crt")"
    echo "FERRY_TESTBED_${C}_ADMIN_KEY=$(q "$pki/admin.key")"
    echo "FERRY_TESTBED_${C}_AGENT_CERT=$(q "$pki/agent.crt")"
    echo "FERRY_TESTBED_${C}_AGENT_KEY=$(q "$pki/agent.key")"
  done
  echo "FERRY_TESTBED_AGENT_USER=ferry-agent"
  echo "FERRY_TESTBED_VELERO_NAMESPACE=velero"
  echo "FERRY_TESTBED_S3_ENDPOINT=http://127.0.0.1:$s3_port"
  echo "FERRY_TESTBED_S3_PORT=$s3_port"
  echo "FERRY_TESTBED_S3_REGION=$s3_region"
  echo "FERRY_TESTBED_S3_ACCESS_KEY=$s3_access_key"
  echo "FERRY_TESTBED_S3_SECRET_KEY=$s3_secret_key"
  echo "FERRY_TESTBED_S3_BUCKET=$s3_bucket"
  echo "FERRY_TESTBED_LOGS=$(q "$state/logs")"
  echo "FERRY_TESTBED_CRDS_DIR=$(q "$FERRY_TESTBED_CRDS_DIR")"
  echo "FERRY_TESTBED_VELERO=$(q "$FERRY_TESTBED_VELERO")"
  echo "FERRY_TESTBED_VELERO_PLUGIN_DIR=$(q "$FERRY_TESTBED_VELERO_PLUGIN_DIR")"
} >"$state/env.tmp"
mv "$state/env.tmp" "$state/env"
ready=1
log "test bed up: clusters a (:$api_a) and b (:$api_b), MinIO :$s3_port"
echo "$state/env"
