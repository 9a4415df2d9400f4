package topology

// IdentityMaterial is IdentityMaterialMessage (domain "identity-material"):
// the encrypted material of a passed identity verification, to store.
type IdentityMaterial struct {
	Username     string `json:"username"`
	CertifyID    string `json:"certifyId"`
	MaterialInfo string `json:"materialInfo"` // encrypted JSON from Alipay
	LastError    string `json:"lastError"`
}

// Record is the Java record name.
func (IdentityMaterial) Record() string { return "IdentityMaterialMessage" }

// Domain is the domain IdentityMaterial travels on.
func (IdentityMaterial) Domain() string { return DomainIdentityMaterial }

// Validate requires the user, the certification id and the material.
func (m IdentityMaterial) Validate() error {
	return firstError(
		required("username", m.Username),
		required("certifyId", m.CertifyID),
		required("materialInfo", m.MaterialInfo),
	)
}
