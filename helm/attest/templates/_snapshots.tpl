{{/*
Snapshots (values `snapshots`): the router coordinates a snapshot and the shard nodes move the files, so S3
credentials and a directory destination's volume go into the shard and router pods. The CronJob
(snapshot-cronjob.yaml) only calls the router.
*/}}

{{/* Whether a role's pods move snapshot files: (dict "root" $ "role" "shard"). */}}
{{- define "attest.snapshotRole" -}}
{{- if has .role (list "shard" "router") -}}true{{- end -}}
{{- end -}}

{{/* The router's HTTP API as the Service publishes it (what `attest --server` takes). */}}
{{- define "attest.routerHttpUrl" -}}
{{- printf "%s://%s-router.%s.svc.%s:%d" (include "attest.scheme" .) (include "attest.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.router.ports.http) -}}
{{- end -}}

{{/* AWS_* environment of the shard and router containers, what object_store's from_env reads, and with a
volume its mount path as the one admitted snapshot root (`snapshots.allowed_roots`): (dict "root" $ "role"
"shard"). Nothing for other roles or without `snapshots.s3` or `snapshots.volume` settings. */}}
{{- define "attest.snapshotEnv" -}}
{{- $s3 := .root.Values.snapshots.s3 -}}
{{- $v := .root.Values.snapshots.volume -}}
{{- if include "attest.snapshotRole" . }}
{{- if $v.claimName }}
{{- /* A node admits a directory destination only under its configured roots: the volume's mount. */}}
- name: ATTEST__SNAPSHOTS__ALLOWED_ROOTS
  value: {{ list $v.mountPath | toJson | quote }}
{{- end }}
{{- with $s3.existingSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_ACCESS_KEY_ID
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SECRET_ACCESS_KEY
- name: AWS_SESSION_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: AWS_SESSION_TOKEN
      optional: true
{{- end }}
{{- with $s3.endpoint }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
{{- with $s3.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- if $s3.allowHttp }}
- name: AWS_ALLOW_HTTP
  value: "true"
{{- end }}
{{- end }}
{{- end -}}

{{/* The directory destination's volume, at the same path in every shard and router pod: (dict "root" $ "role"
"shard"). */}}
{{- define "attest.snapshotVolumeMounts" -}}
{{- $v := .root.Values.snapshots.volume -}}
{{- if and (include "attest.snapshotRole" .) $v.claimName }}
- name: snapshots
  mountPath: {{ $v.mountPath }}
{{- end }}
{{- end -}}

{{- define "attest.snapshotVolumes" -}}
{{- $v := .root.Values.snapshots.volume -}}
{{- if and (include "attest.snapshotRole" .) $v.claimName }}
- name: snapshots
  persistentVolumeClaim:
    claimName: {{ $v.claimName }}
{{- end }}
{{- end -}}

{{/* Snapshot settings that are well-formed but cannot work. Included by the CronJob and the shard StatefulSet
template, so they are refused also while the schedule is off. */}}
{{- define "attest.snapshotValidate" -}}
{{- $s := .Values.snapshots -}}
{{- $dest := $s.destination -}}
{{- $mount := trimSuffix "/" $s.volume.mountPath -}}
{{- if and $s.enabled (not $dest) -}}
{{- fail "snapshots.enabled needs snapshots.destination: s3://bucket[/prefix] (with snapshots.s3), or a directory under snapshots.volume.mountPath (with snapshots.volume.claimName, a ReadWriteMany PVC)" -}}
{{- end -}}
{{- if $s.volume.claimName -}}
{{- range $taken := list "/tmp" "/etc/attest" "/var/lib/attest" -}}
{{- if or (eq $mount $taken) (hasPrefix (printf "%s/" $taken) $mount) (hasPrefix (printf "%s/" $mount) $taken) -}}
{{- fail (printf "snapshots.volume.mountPath %s overlaps %s, which the pods mount already" $s.volume.mountPath $taken) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $dest (not (hasPrefix "s3://" $dest)) -}}
{{- if not $s.volume.claimName -}}
{{- fail (printf "snapshots.destination %s is a directory: every shard node and the router must reach it, so set snapshots.volume.claimName (an existing ReadWriteMany PVC, mounted at snapshots.volume.mountPath %s), or use s3://bucket[/prefix]" $dest $s.volume.mountPath) -}}
{{- end -}}
{{- if not (or (eq $dest $mount) (hasPrefix (printf "%s/" $mount) $dest)) -}}
{{- fail (printf "snapshots.destination %s is not under snapshots.volume.mountPath %s, where the shard and router pods mount the volume" $dest $s.volume.mountPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}
