package topology

// IdentityMaterial is IdentityMaterialMessage (domain "identity-material"):
// the encrypted material of a passed identity verification, to store.
type IdentityMaterial struct {
	Username     string `json:"username"`
	CertifyID    string `json:"certifyId"`
	MaterialInfo string `json:"materialInfo"` // encrypted JSON from Alipay
	LastError    string `json:"lastError"`
}
