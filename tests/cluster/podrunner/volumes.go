package main

// The pod's volumes, made as the kubelet's volume plugins make them: configMap, secret,
// downwardAPI and projected volumes are files written under the pod's directory (the
// serviceAccountToken projection is a real TokenRequest bound to the pod, the way the kubelet
// gets the token the ServiceAccount admission plugin asks for); emptyDir is a directory, or a
// tmpfs with medium Memory; a persistentVolumeClaim must be bound to a hostPath or local
// PersistentVolume, whose directory is mounted; hostPath is the host's path. Other kinds are
// refused with a FailedMount event, and the pod waits, as it would on a node without the driver.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/api/v1/resource"
)

type volume struct {
	path     string // host directory ("" for a tmpfs)
	tmpfs    bool
	size     string
	readOnly bool // configMap, secret, downwardAPI and projected volumes are always read-only
}

type fileSet map[string]fileData // relative path -> content

type fileData struct {
	data []byte
	mode os.FileMode
}

func (fs fileSet) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for rel, f := range fs {
		if strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") {
			return fmt.Errorf("path %q leaves the volume", rel)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func modeOr(m *int32, def *int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	if def != nil {
		return os.FileMode(*def)
	}
	return 0o644
}

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, defMode *int32, optional bool, what string, fs fileSet) error {
	if len(items) == 0 {
		for k, v := range data {
			fs[k] = fileData{v, modeOr(nil, defMode)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		fs[it.Path] = fileData{v, modeOr(it.Mode, defMode)}
	}
	return nil
}

type volumeMaker struct {
	ctx context.Context
	cs  kubernetes.Interface
	pod *corev1.Pod
}

func (m *volumeMaker) configMapData(name string, optional bool) (map[string][]byte, error) {
	cm, err := m.cs.CoreV1().ConfigMaps(m.pod.Namespace).Get(m.ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return data, nil
}

func (m *volumeMaker) secretData(name string, optional bool) (map[string][]byte, error) {
	s, err := m.cs.CoreV1().Secrets(m.pod.Namespace).Get(m.ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) && optional {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return s.Data, nil
}

func (m *volumeMaker) downwardFiles(items []corev1.DownwardAPIVolumeFile, defMode *int32, fs fileSet) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(m.pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resource.ExtractResourceValueByContainerName(it.ResourceFieldRef, m.pod, it.ResourceFieldRef.ContainerName)
		}
		if err != nil {
			return fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		fs[it.Path] = fileData{[]byte(v), modeOr(it.Mode, defMode)}
	}
	return nil
}

// token asks the API server for a token of the pod's service account, bound to the pod.
func (m *volumeMaker) token(p *corev1.ServiceAccountTokenProjection) ([]byte, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1",
			Name: m.pod.Name, UID: m.pod.UID},
	}}
	if p.Audience != "" {
		tr.Spec.Audiences = []string{p.Audience}
	}
	sa := m.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	out, err := m.cs.CoreV1().ServiceAccounts(m.pod.Namespace).CreateToken(m.ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %q: %w", sa, err)
	}
	return []byte(out.Status.Token), nil
}

// make materializes volume v of the pod under dir.
func (m *volumeMaker) make(v *corev1.Volume, dir string) (volume, error) {
	isTrue := func(b *bool) bool { return b != nil && *b }
	fs := fileSet{}
	switch {
	case v.ConfigMap != nil:
		data, err := m.configMapData(v.ConfigMap.Name, isTrue(v.ConfigMap.Optional))
		if err != nil {
			return volume{}, err
		}
		if err := keyFiles(data, v.ConfigMap.Items, v.ConfigMap.DefaultMode, isTrue(v.ConfigMap.Optional),
			"configmap "+v.ConfigMap.Name, fs); err != nil {
			return volume{}, err
		}
	case v.Secret != nil:
		data, err := m.secretData(v.Secret.SecretName, isTrue(v.Secret.Optional))
		if err != nil {
			return volume{}, err
		}
		if err := keyFiles(data, v.Secret.Items, v.Secret.DefaultMode, isTrue(v.Secret.Optional),
			"secret "+v.Secret.SecretName, fs); err != nil {
			return volume{}, err
		}
	case v.DownwardAPI != nil:
		if err := m.downwardFiles(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, fs); err != nil {
			return volume{}, err
		}
	case v.Projected != nil:
		for _, src := range v.Projected.Sources {
			switch {
			case src.ServiceAccountToken != nil:
				tok, err := m.token(src.ServiceAccountToken)
				if err != nil {
					return volume{}, err
				}
				fs[src.ServiceAccountToken.Path] = fileData{tok, modeOr(nil, v.Projected.DefaultMode)}
			case src.ConfigMap != nil:
				data, err := m.configMapData(src.ConfigMap.Name, isTrue(src.ConfigMap.Optional))
				if err != nil {
					return volume{}, err
				}
				if err := keyFiles(data, src.ConfigMap.Items, v.Projected.DefaultMode, isTrue(src.ConfigMap.Optional),
					"configmap "+src.ConfigMap.Name, fs); err != nil {
					return volume{}, err
				}
			case src.Secret != nil:
				data, err := m.secretData(src.Secret.Name, isTrue(src.Secret.Optional))
				if err != nil {
					return volume{}, err
				}
				if err := keyFiles(data, src.Secret.Items, v.Projected.DefaultMode, isTrue(src.Secret.Optional),
					"secret "+src.Secret.Name, fs); err != nil {
					return volume{}, err
				}
			case src.DownwardAPI != nil:
				if err := m.downwardFiles(src.DownwardAPI.Items, v.Projected.DefaultMode, fs); err != nil {
					return volume{}, err
				}
			default:
				return volume{}, fmt.Errorf("projected volume %q: a source this runner does not support", v.Name)
			}
		}
	case v.EmptyDir != nil:
		if v.EmptyDir.Medium == corev1.StorageMediumMemory {
			size := ""
			if v.EmptyDir.SizeLimit != nil {
				size = fmt.Sprintf("%dk", (v.EmptyDir.SizeLimit.Value()+1023)/1024)
			}
			return volume{tmpfs: true, size: size}, nil
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return volume{}, err
		}
		return volume{path: dir}, nil
	case v.HostPath != nil:
		if v.HostPath.Type != nil && (*v.HostPath.Type == corev1.HostPathDirectoryOrCreate) {
			if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
				return volume{}, err
			}
		}
		if _, err := os.Stat(v.HostPath.Path); err != nil {
			return volume{}, fmt.Errorf("hostPath %q: %w", v.HostPath.Path, err)
		}
		return volume{path: v.HostPath.Path}, nil
	case v.PersistentVolumeClaim != nil:
		return m.claim(v.PersistentVolumeClaim)
	default:
		return volume{}, fmt.Errorf("volume %q: a kind this runner does not support", v.Name)
	}
	if err := fs.write(dir); err != nil {
		return volume{}, fmt.Errorf("volume %q: %w", v.Name, err)
	}
	return volume{path: dir, readOnly: true}, nil
}

// claim is the directory of the PersistentVolume bound to the claim.
func (m *volumeMaker) claim(src *corev1.PersistentVolumeClaimVolumeSource) (volume, error) {
	pvc, err := m.cs.CoreV1().PersistentVolumeClaims(m.pod.Namespace).Get(m.ctx, src.ClaimName, metav1.GetOptions{})
	if err != nil {
		return volume{}, fmt.Errorf("persistentvolumeclaim %q: %w", src.ClaimName, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return volume{}, fmt.Errorf("persistentvolumeclaim %q is not bound", src.ClaimName)
	}
	pv, err := m.cs.CoreV1().PersistentVolumes().Get(m.ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return volume{}, fmt.Errorf("persistentvolume %q: %w", pvc.Spec.VolumeName, err)
	}
	var path string
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	default:
		return volume{}, fmt.Errorf("persistentvolume %q: only hostPath and local volumes can be mounted here", pv.Name)
	}
	if err := os.MkdirAll(path, 0o777); err != nil {
		return volume{}, err
	}
	return volume{path: path, readOnly: src.ReadOnly}, nil
}
