{{/*
Names, labels, addresses and the pieces every role's pod shares. The roles' own templates stay short: they say
which flags their process gets, the rest comes from here.
*/}}

{{- define "attest.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Short enough that "<fullname>-shard-headless" (a Service name) stays within 63 characters. */}}
{{- define "attest.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "attest.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "attest.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: (dict "root" $ "role" "meta"). */}}
{{- define "attest.selectorLabels" -}}
app.kubernetes.io/name: {{ include "attest.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "attest.componentLabels" -}}
{{ include "attest.labels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "attest.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "attest.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "attest.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* http or https: the scheme of every address one node gives another. */}}
{{- define "attest.scheme" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{- define "attest.metaHeadless" -}}{{ include "attest.fullname" . }}-meta-headless{{- end -}}
{{- define "attest.shardHeadless" -}}{{ include "attest.fullname" . }}-shard-headless{{- end -}}

{{/* The gRPC address of meta pod N: (dict "root" $ "ordinal" N). */}}
{{- define "attest.metaPodAddress" -}}
{{- $root := .root -}}
{{- printf "%s://%s-meta-%d.%s.%s.svc.%s:%d" (include "attest.scheme" $root) (include "attest.fullname" $root) (int .ordinal) (include "attest.metaHeadless" $root) $root.Release.Namespace $root.Values.clusterDomain (int $root.Values.meta.ports.grpc) -}}
{{- end -}}

{{/* `--meta`: every meta pod's address, comma-separated (clients fail over between them). */}}
{{- define "attest.metaAddresses" -}}
{{- $root := . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.meta.replicas) -}}
{{- $out = append $out (include "attest.metaPodAddress" (dict "root" $root "ordinal" $i)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* `--meta-peers` of the initial voters: ID=ADDRESS with ID = ordinal + 1. */}}
{{- define "attest.metaPeers" -}}
{{- $root := .root -}}
{{- $out := list -}}
{{- range $i := until (int .count) -}}
{{- $out = append $out (printf "%d=%s" (add $i 1) (include "attest.metaPodAddress" (dict "root" $root "ordinal" $i))) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* The URL the router and answer tier embed through, or nothing (the local model in process). */}}
{{- define "attest.embedderUrl" -}}
{{- if .Values.embedder.url -}}
{{- .Values.embedder.url -}}
{{- else if .Values.embedder.enabled -}}
{{- printf "%s://%s-embedder.%s.svc.%s:%d/v1/embeddings" (include "attest.scheme" .) (include "attest.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.embedder.ports.http) -}}
{{- end -}}
{{- end -}}

{{- define "attest.authSecretName" -}}
{{- default (printf "%s-auth" (include "attest.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "attest.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "attest.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{/* Whether the cluster CA stands for the cluster key (mutual TLS). */}}
{{- define "attest.mutualTls" -}}
{{- if and .Values.tls.enabled .Values.tls.mutual -}}true{{- end -}}
{{- end -}}

{{/*
Settings that are well-formed but cannot work together: refused here, with what to do instead. Included by every
workload template, so `helm template` and `helm install` stop before anything is applied.
*/}}
{{- define "attest.validate" -}}
{{- $v := .Values -}}
{{- $voters := int $v.meta.replicas -}}
{{- $initial := int $v.meta.initialVoters -}}
{{- if and (lt $voters $initial) (not $v.meta.allowScaleDown) -}}
{{- fail (printf "meta.replicas (%d) is below meta.initialVoters (%d): removing Raft voters is never implicit. Run `attest meta remove` for each voter above the new count first (README, \"Scale\"), then set meta.allowScaleDown=true. At install, set meta.initialVoters equal to meta.replicas." $voters $initial) -}}
{{- end -}}
{{- if and $v.shard.drain.enabled (ge (int $v.shard.drain.timeoutSeconds) (int $v.shard.terminationGracePeriodSeconds)) -}}
{{- fail (printf "shard.drain.timeoutSeconds (%d) must be below shard.terminationGracePeriodSeconds (%d): the preStop drain counts against the grace period, and the shard needs the rest to finish a seal after SIGTERM" (int $v.shard.drain.timeoutSeconds) (int $v.shard.terminationGracePeriodSeconds)) -}}
{{- end -}}
{{- if and $v.embedder.enabled $v.embedder.url -}}
{{- fail "embedder.enabled and embedder.url are exclusive: either run the embedding service in the cluster, or name an external one" -}}
{{- end -}}
{{- if and $v.embedder.gpu.enabled (not $v.embedder.enabled) -}}
{{- fail "embedder.gpu.enabled needs embedder.enabled=true (an external service's GPUs are its own business: set embedder.url)" -}}
{{- end -}}
{{- range $role := list "router" "answer" "embedder" -}}
{{- $a := (index $v $role).autoscaling -}}
{{- if and $a.enabled (gt (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- fail (printf "%s.autoscaling.minReplicas (%d) is above maxReplicas (%d)" $role (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- if $v.tls.enabled -}}
{{- if and (not $v.tls.existingSecret) (or (not $v.tls.cert) (not $v.tls.key)) -}}
{{- fail "tls.enabled needs tls.existingSecret (a Secret with tls.crt, tls.key and ca.crt, e.g. from cert-manager) or tls.cert and tls.key" -}}
{{- end -}}
{{- if and $v.tls.mutual (not $v.tls.existingSecret) (not $v.tls.ca) -}}
{{- fail "tls.mutual needs the cluster CA: tls.ca, or tls.existingSecret with ca.crt (or set tls.mutual=false and give auth.clusterKey)" -}}
{{- end -}}
{{- end -}}
{{- if not $v.insecure -}}
{{- if not $v.tls.enabled -}}
{{- fail "attest serve refuses to run without TLS: set tls.enabled=true with tls.existingSecret (or tls.cert/tls.key/tls.ca), or insecure=true for a trial on a trusted network" -}}
{{- end -}}
{{- if and (not $v.auth.existingSecret) (not $v.auth.adminKey) -}}
{{- fail "the router and answer tier need an admin key, and the chart never generates one: set auth.existingSecret (a Secret with admin-key and cluster-key) or auth.adminKey" -}}
{{- end -}}
{{- if and (not $v.auth.existingSecret) (not $v.auth.clusterKey) (not (include "attest.mutualTls" .)) -}}
{{- fail "meta, shard and router need the cluster credential: auth.clusterKey (or auth.existingSecret), or mutual TLS (tls.mutual=true with a CA)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Flags every `attest serve` gets: transport security, config, logs. */}}
{{- define "attest.commonArgs" -}}
- --config=/etc/attest/config.yaml
- --log-level={{ .Values.logLevel }}
{{- if .Values.insecure }}
- --insecure
{{- end }}
{{- if .Values.tls.enabled }}
- --tls-cert=/etc/attest/tls/{{ .Values.tls.certKey }}
- --tls-key=/etc/attest/tls/{{ .Values.tls.keyKey }}
{{- if .Values.tls.mutual }}
- --tls-ca=/etc/attest/tls/{{ .Values.tls.caKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Environment every role gets: (dict "root" $ "role" "meta" "admin" bool). Keys travel as variables, never as
flags (a flag shows in `ps`). */}}
{{- define "attest.env" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- if not $v.insecure }}
- name: ATTEST_CLUSTER_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "attest.authSecretName" $root }}
      key: {{ $v.auth.clusterKeyKey }}
      {{- if include "attest.mutualTls" $root }}
      optional: true
      {{- end }}
{{- if .admin }}
- name: ATTEST_ADMIN_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "attest.authSecretName" $root }}
      key: {{ $v.auth.adminKeyKey }}
{{- end }}
{{- end }}
{{- if $v.metricsToken.existingSecret }}
- name: ATTEST_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $v.metricsToken.existingSecret }}
      key: {{ $v.metricsToken.key }}
{{- end }}
{{- /* What `attest status` and `attest cluster ...` read, so `kubectl exec` into any pod works without flags. */}}
- name: ATTEST_META
  value: {{ include "attest.metaAddresses" $root | quote }}
{{- if $v.tls.enabled }}
- name: ATTEST_TLS_CERT
  value: /etc/attest/tls/{{ $v.tls.certKey }}
- name: ATTEST_TLS_KEY
  value: /etc/attest/tls/{{ $v.tls.keyKey }}
{{- if $v.tls.mutual }}
- name: ATTEST_TLS_CA
  value: /etc/attest/tls/{{ $v.tls.caKey }}
{{- end }}
{{- if or $v.tls.ca $v.tls.existingSecret }}
- name: ATTEST_CA_CERT
  value: /etc/attest/tls/{{ $v.tls.caKey }}
{{- end }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with (index $v .role).extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volume mounts every role gets. */}}
{{- define "attest.volumeMounts" -}}
- name: config
  mountPath: /etc/attest/config.yaml
  subPath: config.yaml
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/attest/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "attest.volumes" -}}
- name: config
  configMap:
    name: {{ include "attest.fullname" . }}-config
- name: tmp
  emptyDir: {}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "attest.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Pod annotations: restarts on a config or chart-made Secret change, Prometheus discovery. (dict "root" $
"role" "meta" "port" N) */}}
{{- define "attest.podAnnotations" -}}
{{- $root := .root -}}
checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
{{- if $root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- if $root.Values.tls.enabled }}
prometheus.io/scheme: https
{{- end }}
{{- end }}
{{- with (index $root.Values .role).podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Probes of one container: (dict "root" $ "grpcPort" N "httpPort" N "startup" map).
TLS off: native gRPC health probes on the gRPC port: the overall status ("") is the role's readiness (startup,
readiness), the service `liveness` is SERVING while the process runs (liveness). TLS on: kubelet's gRPC probe cannot speak TLS, so HTTPS GETs
of /healthz (liveness) and /readyz (startup, readiness) on the HTTP port. The embedder's port under mutual TLS asks
for a client certificate without requiring one (its API routes want it, or the cluster key; the probe paths not),
so kubelet, which has none, probes it the same way.
*/}}
{{- define "attest.probes" -}}
{{- $p := .root.Values.probes -}}
{{- $startup := merge (deepCopy (default (dict) .startup)) $p.startup -}}
{{- range $kind := list "startup" "readiness" "liveness" }}
{{ $kind }}Probe:
  {{- if not $.root.Values.tls.enabled }}
  grpc:
    port: {{ $.grpcPort }}
    {{- if eq $kind "liveness" }}
    service: liveness
    {{- end }}
  {{- else }}
  httpGet:
    path: {{ if eq $kind "liveness" }}/healthz{{ else }}/readyz{{ end }}
    port: {{ $.httpPort }}
    scheme: HTTPS
  {{- end }}
  {{- if eq $kind "startup" }}
  periodSeconds: {{ $startup.periodSeconds }}
  failureThreshold: {{ $startup.failureThreshold }}
  {{- else }}
  {{- $k := index $p $kind }}
  periodSeconds: {{ $k.periodSeconds }}
  failureThreshold: {{ $k.failureThreshold }}
  timeoutSeconds: {{ $k.timeoutSeconds }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Scheduling: node selector, tolerations, anti-affinity preset, zone spread. (dict "root" $ "role" "meta"
"values" <role block>) */}}
{{- define "attest.scheduling" -}}
{{- $r := .values -}}
{{- $sel := include "attest.selectorLabels" (dict "root" .root "role" .role) | fromYaml -}}
{{- with $r.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $r.affinity }}
affinity:
  {{- toYaml $r.affinity | nindent 2 }}
{{- else if eq $r.antiAffinity "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml $sel | nindent 12 }}
{{- else if eq $r.antiAffinity "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- toYaml $sel | nindent 14 }}
{{- end }}
{{- if $r.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ $r.topologySpread.maxSkew }}
    topologyKey: {{ $r.topologySpread.topologyKey }}
    whenUnsatisfiable: {{ $r.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- toYaml $sel | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The pod-level settings every role shares. */}}
{{- define "attest.podCommon" -}}
serviceAccountName: {{ include "attest.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "attest.containerCommon" -}}
image: {{ include "attest.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.containerSecurityContext | nindent 2 }}
{{- end -}}

{{/* A PodDisruptionBudget: (dict "root" $ "role" "router" "values" <role block> "replicas" N). */}}
{{- define "attest.pdb" -}}
{{- $r := .values -}}
{{- $scaled := and (hasKey $r "autoscaling") $r.autoscaling.enabled -}}
{{- if and $r.pdb.enabled (or $scaled (gt (int .replicas) 1)) }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "attest.fullname" .root }}-{{ .role }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "attest.componentLabels" . | nindent 4 }}
spec:
  maxUnavailable: {{ $r.pdb.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "attest.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* A HorizontalPodAutoscaler: (dict "root" $ "role" "router" "values" <role block>). */}}
{{- define "attest.hpa" -}}
{{- $a := .values.autoscaling -}}
{{- if $a.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "attest.fullname" .root }}-{{ .role }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "attest.componentLabels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "attest.fullname" .root }}-{{ .role }}
  minReplicas: {{ $a.minReplicas }}
  maxReplicas: {{ $a.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $a.targetCPUUtilizationPercentage }}
    {{- with $a.metrics }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $a.behavior }}
  behavior:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
A Deployment of a stateless role: (dict "root" $ "role" "router" "values" <role block> "args" <list> "admin" bool).
Without `replicas` while an HPA owns the count, so `helm upgrade` does not reset it.
*/}}
{{- define "attest.deployment" -}}
{{- $root := .root -}}
{{- $r := .values -}}
{{- $gpu := and (eq .role "embedder") $r.gpu.enabled -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "attest.fullname" $root }}-{{ .role }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "attest.componentLabels" . | nindent 4 }}
spec:
  {{- if not $r.autoscaling.enabled }}
  replicas: {{ $r.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "attest.selectorLabels" . | nindent 6 }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        {{- include "attest.selectorLabels" . | nindent 8 }}
        {{- with $r.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- include "attest.podAnnotations" (dict "root" $root "role" .role "port" $r.ports.http) | nindent 8 }}
    spec:
      {{- include "attest.podCommon" $root | nindent 6 }}
      terminationGracePeriodSeconds: {{ $r.terminationGracePeriodSeconds }}
      {{- $sched := $r }}
      {{- if $gpu }}
      {{- $sched = merge (dict "nodeSelector" (merge (deepCopy $r.nodeSelector) $r.gpu.nodeSelector) "tolerations" (concat $r.tolerations $r.gpu.tolerations)) $r }}
      {{- end }}
      {{- include "attest.scheduling" (dict "root" $root "role" .role "values" $sched) | trim | nindent 6 }}
      containers:
        - name: {{ .role }}
          {{- include "attest.containerCommon" $root | nindent 10 }}
          args:
            {{- toYaml .args | nindent 12 }}
            {{- include "attest.commonArgs" $root | nindent 12 }}
            {{- with $r.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            {{- include "attest.env" (dict "root" $root "role" .role "admin" .admin) | nindent 12 }}
            {{- with include "attest.snapshotEnv" (dict "root" $root "role" .role) | trim }}{{ . | nindent 12 }}{{ end }}
          ports:
            - name: http
              containerPort: {{ $r.ports.http }}
            - name: grpc
              containerPort: {{ $r.ports.grpc }}
          {{- include "attest.probes" (dict "root" $root "grpcPort" $r.ports.grpc "httpPort" $r.ports.http) | trim | nindent 10 }}
          {{- with $r.preStopSleepSeconds }}
          lifecycle:
            preStop:
              exec:
                # The pod leaves the Service's endpoints while it terminates, not before: it keeps serving this
                # long, so a connection routed to it just before is answered rather than cut by the shutdown.
                command: ["/bin/sh", "-c", "sleep {{ . }}"]
          {{- end }}
          resources:
            {{- $res := deepCopy $r.resources }}
            {{- if $gpu }}
            {{- $_ := set $res "limits" (merge (dict $r.gpu.resourceName $r.gpu.count) (default (dict) $res.limits)) }}
            {{- end }}
            {{- toYaml $res | nindent 12 }}
          volumeMounts:
            {{- include "attest.volumeMounts" $root | nindent 12 }}
            {{- with include "attest.snapshotVolumeMounts" (dict "root" $root "role" .role) | trim }}{{ . | nindent 12 }}{{ end }}
      volumes:
        {{- include "attest.volumes" $root | nindent 8 }}
        {{- with include "attest.snapshotVolumes" (dict "root" $root "role" .role) | trim }}{{ . | nindent 8 }}{{ end }}
{{- with include "attest.hpa" . | trim }}
---
{{ . }}
{{- end }}
{{- with include "attest.pdb" (dict "root" $root "role" .role "values" $r "replicas" $r.replicas) | trim }}
---
{{ . }}
{{- end }}
{{- end -}}
