package cmd

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// DefaultConfigFile is read when it exists and $MDTOOL_CONFIG is unset.
const DefaultConfigFile = "/etc/mdtool/mdtool.yaml"

// configurable marks a flag whose default may come from MDTOOL_<FLAG> or the
// configuration file. Safety switches (--force, --run, ...) are never
// configurable: a script must say them.
const configurable = "mdtool/configurable"

func markConfigurable(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, configurable, []string{"true"}); err != nil {
			panic(err)
		}
	}
}

// loadConfig reads the configuration file and environment through viper.
func loadConfig() (*viper.Viper, error) {
	v := viper.New()
	v.SetEnvPrefix("MDTOOL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	path := os.Getenv("MDTOOL_CONFIG")
	explicit := path != ""
	if path == "" {
		path = DefaultConfigFile
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		var nf viper.ConfigFileNotFoundError
		if errors.As(err, &nf) || (!explicit && errors.Is(err, os.ErrNotExist)) {
			return v, nil
		}
		if _, statErr := os.Stat(path); !explicit && statErr != nil {
			return v, nil
		}
		return nil, fmt.Errorf("config file %s: %v", path, err)
	}
	return v, nil
}

// applyConfig sets every configurable flag the user did not give from, in
// order: MDTOOL_<FLAG>, the key "<command>.<flag>" in the config file, the
// key "<flag>" in the config file.
func applyConfig(c *cobra.Command, _ *Env) error {
	v, err := loadConfig()
	if err != nil {
		return exitMsg(ExitUsage, err.Error())
	}
	var ferr error
	visit := func(f *pflag.Flag) {
		if ferr != nil || f.Changed || f.Annotations[configurable] == nil {
			return
		}
		envKey := "MDTOOL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		sectionKey := c.Name() + "." + f.Name
		var val, from string
		switch {
		case os.Getenv(envKey) != "":
			val, from = v.GetString(f.Name), envKey
		case v.InConfig(sectionKey):
			val, from = v.GetString(sectionKey), sectionKey
		case v.InConfig(f.Name):
			val, from = v.GetString(f.Name), f.Name
		default:
			return
		}
		if err := f.Value.Set(val); err != nil {
			ferr = fmt.Errorf("configuration %s=%q: %v", from, val, err)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	if ferr != nil {
		return exitMsg(ExitUsage, ferr.Error())
	}
	return nil
}
