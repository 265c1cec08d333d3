{{/* The container image: a reference with a digest as it is, otherwise repository:tag. */}}
{{- define "nginx.image" -}}
{{- if contains "@" .Values.image.repository -}}
{{ .Values.image.repository }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "nginx.labels" -}}
app.kubernetes.io/name: nginx
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
