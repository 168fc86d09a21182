package testenv

import (
	"sort"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kubeconfig renders cfg as a kubeconfig whose cluster, user and context
// are all called name, the way kind writes one per cluster.
func Kubeconfig(cfg *rest.Config, name string) ([]byte, error) {
	return Kubeconfigs(map[string]*rest.Config{name: cfg})
}

// Kubeconfigs renders one cluster, user and context per entry, each named
// by its key; the current context is the first name in order.
func Kubeconfigs(cfgs map[string]*rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	var names []string
	for name, cfg := range cfgs {
		kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) > 0 {
		kc.CurrentContext = names[0]
	}
	return clientcmd.Write(*kc)
}
