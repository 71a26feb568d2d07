// Command crds prints the CustomResourceDefinitions the ferry test bed installs on its clusters:
//
//   - the upstream Velero CRDs, exactly as the Velero module pinned in go.mod embeds them
//     (packages config/crd/v1/crds and config/crd/v2alpha1/crds), and
//   - a NonAdminBackup CRD (oadp.openshift.io/v1alpha1) written from docs of OADP's non-admin controller
//     (docs/upstream.md §O1.2), because OADP's own CRD module is not obtainable here. Its spec.backupSpec
//     and the Velero parts of its status are the schemas taken from the Velero CRDs above, so they can never
//     drift from the Velero version in use. The spec is strict (no preserve-unknown-fields): a wrongly shaped
//     NAB is rejected as on a real cluster.
//
// Usage: crds [-out DIR]. Prints all CRDs as one multi-document YAML stream on stdout; with -out also writes
// one file per CRD, DIR/<crd name>.yaml, ready for a server-side apply.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"

	v1crds "github.com/vmware-tanzu/velero/config/crd/v1/crds"
	v2alpha1crds "github.com/vmware-tanzu/velero/config/crd/v2alpha1/crds"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	out := flag.String("out", "", "also write one file per CRD into this directory")
	flag.Parse()

	var crds []*apiextv1.CustomResourceDefinition
	crds = append(crds, v1crds.CRDs...)
	crds = append(crds, v2alpha1crds.CRDs...)
	nab, err := nonAdminBackup(crds)
	if err != nil {
		fail(err)
	}
	crds = append(crds, nab)
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })

	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fail(err)
		}
	}
	for i, crd := range crds {
		doc, err := render(crd)
		if err != nil {
			fail(fmt.Errorf("%s: %w", crd.Name, err))
		}
		if i > 0 {
			fmt.Println("---")
		}
		os.Stdout.Write(doc)
		if *out != "" {
			if err := os.WriteFile(filepath.Join(*out, crd.Name+".yaml"), doc, 0o644); err != nil {
				fail(err)
			}
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crds:", err)
	os.Exit(1)
}

// render gives the CRD as YAML for an apply: apiVersion and kind set, no status, no null creationTimestamp.
func render(crd *apiextv1.CustomResourceDefinition) ([]byte, error) {
	c := crd.DeepCopy()
	c.APIVersion = "apiextensions.k8s.io/v1"
	c.Kind = "CustomResourceDefinition"
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return yaml.Marshal(obj)
}

// versionSchema is the OpenAPI schema of the named version of the CRD with the given plural in group velero.io.
func versionSchema(crds []*apiextv1.CustomResourceDefinition, plural, version string) (*apiextv1.JSONSchemaProps, error) {
	for _, crd := range crds {
		if crd.Spec.Group != "velero.io" || crd.Spec.Names.Plural != plural {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				return v.Schema.OpenAPIV3Schema, nil
			}
		}
	}
	return nil, fmt.Errorf("no schema for velero.io/%s %s in the Velero CRDs", version, plural)
}

// property is the schema of a top-level property (spec, status) of a Velero resource, deep-copied.
func property(crds []*apiextv1.CustomResourceDefinition, plural, name string) (apiextv1.JSONSchemaProps, error) {
	s, err := versionSchema(crds, plural, "v1")
	if err != nil {
		return apiextv1.JSONSchemaProps{}, err
	}
	p, ok := s.Properties[name]
	if !ok {
		return apiextv1.JSONSchemaProps{}, fmt.Errorf("velero.io/v1 %s has no %q in its schema", plural, name)
	}
	if p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields {
		return apiextv1.JSONSchemaProps{}, fmt.Errorf("velero.io/v1 %s %q preserves unknown fields; expected a strict schema", plural, name)
	}
	return *p.DeepCopy(), nil
}

func str(description string) apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{Type: "string", Description: description}
}

func object(description string, props map[string]apiextv1.JSONSchemaProps, required ...string) apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{Type: "object", Description: description, Properties: props, Required: required}
}

// counters is an object of integer fields, as NAC's DataMoverDataUploads and FileSystemPodVolumeBackups.
func counters(description string, names ...string) apiextv1.JSONSchemaProps {
	props := map[string]apiextv1.JSONSchemaProps{}
	for _, n := range names {
		props[n] = apiextv1.JSONSchemaProps{Type: "integer"}
	}
	return object(description, props)
}

// conditions is the schema controller-gen writes for []metav1.Condition.
func conditions() apiextv1.JSONSchemaProps {
	minZero := float64(0)
	var (
		one         int64 = 1
		reasonMax   int64 = 1024
		messageMax  int64 = 32768
		typeNameMax int64 = 316
	)
	item := object("Condition contains details for one aspect of the current state of this API Resource.",
		map[string]apiextv1.JSONSchemaProps{
			"lastTransitionTime": {Type: "string", Format: "date-time",
				Description: "lastTransitionTime is the last time the condition transitioned from one status to another."},
			"message": {Type: "string", MaxLength: &messageMax,
				Description: "message is a human readable message indicating details about the transition."},
			"observedGeneration": {Type: "integer", Format: "int64", Minimum: &minZero,
				Description: "observedGeneration represents the .metadata.generation that the condition was set based upon."},
			"reason": {Type: "string", MinLength: &one, MaxLength: &reasonMax,
				Pattern:     `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
				Description: "reason contains a programmatic identifier indicating the reason for the condition's last transition."},
			"status": {Type: "string", Enum: enum("True", "False", "Unknown"),
				Description: "status of the condition, one of True, False, Unknown."},
			"type": {Type: "string", MaxLength: &typeNameMax,
				Pattern:     `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`,
				Description: "type of condition in CamelCase or in foo.example.com/CamelCase."},
		},
		"lastTransitionTime", "message", "reason", "status", "type")
	return apiextv1.JSONSchemaProps{Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &item}}
}

func enum(values ...string) []apiextv1.JSON {
	out := make([]apiextv1.JSON, 0, len(values))
	for _, v := range values {
		raw, _ := json.Marshal(v)
		out = append(out, apiextv1.JSON{Raw: raw})
	}
	return out
}

// nonAdminBackup is the NonAdminBackup CRD of OADP's non-admin controller (docs/upstream.md §O1.2).
func nonAdminBackup(crds []*apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, error) {
	backupSpec, err := property(crds, "backups", "spec")
	if err != nil {
		return nil, err
	}
	backupStatus, err := property(crds, "backups", "status")
	if err != nil {
		return nil, err
	}
	deleteRequestStatus, err := property(crds, "deletebackuprequests", "status")
	if err != nil {
		return nil, err
	}
	backupSpec.Description = "BackupSpec defines the specification for a Velero backup."
	statusSpec := *backupSpec.DeepCopy()
	statusSpec.Description = "VeleroBackup spec."
	backupStatus.Description = "VeleroBackup status."
	deleteRequestStatus.Description = "VeleroDeleteBackupRequest status."

	spec := object("NonAdminBackupSpec defines the desired state of NonAdminBackup.",
		map[string]apiextv1.JSONSchemaProps{
			"backupSpec": backupSpec,
			"deleteBackup": {Type: "boolean", Description: "DeleteBackup removes the NonAdminBackup and its associated " +
				"NonAdminRestores and VeleroBackup from the cluster, as well as the corresponding data in object storage."},
		},
		"backupSpec")

	status := object("NonAdminBackupStatus defines the observed state of NonAdminBackup.",
		map[string]apiextv1.JSONSchemaProps{
			"veleroBackup": object("VeleroBackup contains information of the related Velero backup.",
				map[string]apiextv1.JSONSchemaProps{
					"spec":      statusSpec,
					"status":    backupStatus,
					"nacuuid":   str("nacuuid references the Velero Backup object by its label containing the same NACUUID."),
					"name":      str("references the VeleroBackup object by its name."),
					"namespace": str("namespace references the Namespace in which the VeleroBackup exists."),
				}),
			"veleroDeleteBackupRequest": object("VeleroDeleteBackupRequest contains information of the related Velero delete backup request.",
				map[string]apiextv1.JSONSchemaProps{
					"status":    deleteRequestStatus,
					"nacuuid":   str("nacuuid references the Velero delete backup request object by its label containing the same NACUUID."),
					"name":      str("name references the Velero delete backup request object by its name."),
					"namespace": str("namespace references the Namespace in which the Velero delete backup request exists."),
				}),
			"dataMoverDataUploads": counters("DataMoverDataUploads contains information of the related Velero DataUpload objects.",
				"total", "new", "accepted", "prepared", "inProgress", "canceling", "canceled", "failed", "completed"),
			"fileSystemPodVolumeBackups": counters("FileSystemPodVolumeBackups contains information of the related Velero PodVolumeBackup objects.",
				"total", "new", "inProgress", "failed", "completed"),
			"queueInfo": object("QueueInfo holds the queue position for a specific VeleroBackup.",
				map[string]apiextv1.JSONSchemaProps{
					"estimatedQueuePosition": {Type: "integer",
						Description: "estimatedQueuePosition is the number of operations ahead in the queue (0 if not queued)."},
				},
				"estimatedQueuePosition"),
			"phase": {Type: "string", Enum: enum("New", "BackingOff", "Created", "Deleting"),
				Description: "phase is a simple one high-level summary of the lifecycle of an NonAdminBackup."},
			"conditions": conditions(),
		})

	root := object("NonAdminBackup is the Schema for the nonadminbackups API.",
		map[string]apiextv1.JSONSchemaProps{
			"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
			"kind":       str("Kind is a string value representing the REST resource this object represents."),
			"metadata":   {Type: "object"},
			"spec":       spec,
			"status":     status,
		})

	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name: "nonadminbackups.oadp.openshift.io",
			Annotations: map[string]string{
				"ferry.local/generated-by": "e2e/testbed/crds: written from OADP's API docs, schemas from Velero " + veleroVersion(),
			},
		},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "oadp.openshift.io",
			Names: apiextv1.CustomResourceDefinitionNames{
				Kind:       "NonAdminBackup",
				ListKind:   "NonAdminBackupList",
				Plural:     "nonadminbackups",
				Singular:   "nonadminbackup",
				ShortNames: []string{"nab"},
			},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name:    "v1alpha1",
				Served:  true,
				Storage: true,
				Schema:  &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				Subresources: &apiextv1.CustomResourceSubresources{
					Status: &apiextv1.CustomResourceSubresourceStatus{},
				},
				AdditionalPrinterColumns: []apiextv1.CustomResourceColumnDefinition{
					{Name: "Request-Phase", Type: "string", JSONPath: ".status.phase"},
					{Name: "Velero-Phase", Type: "string", JSONPath: ".status.veleroBackup.status.phase"},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
			}},
		},
	}
	return crd, nil
}

// veleroVersion is the version of the Velero module this binary was built with.
func veleroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/vmware-tanzu/velero" {
				return dep.Version
			}
		}
	}
	return "(unknown version)"
}
