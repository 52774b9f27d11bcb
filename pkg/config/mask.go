package config

// MaskSetting returns a setting's value as a pipeline's Definition shows
// it: Masked when the key names a credential, and the password of a URL
// or of a key=value connection string masked in any other value.
func MaskSetting(key, value string) string {
	if value != "" && isSecretKey(key) {
		return Masked
	}
	masked := urlPassword.ReplaceAllString(value, "${1}"+Masked+"@")
	return dsnPassword.ReplaceAllString(masked, "${1}"+Masked)
}
