# Sourced by install.sh and uninstall.sh: where agent-collector lives for this user (the same defaults
# as collector/paths.py: XDG on Linux, Application Support on macOS; AGENT_COLLECTOR_* override).
OS=$(uname -s)
if [ "$OS" = Darwin ]; then
  default_data="$HOME/Library/Application Support/agent-collector"
  default_config=$default_data
else
  default_data="${XDG_DATA_HOME:-$HOME/.local/share}/agent-collector"
  default_config="${XDG_CONFIG_HOME:-$HOME/.config}/agent-collector"
fi
DATA_DIR=${AGENT_COLLECTOR_DATA_DIR:-$default_data}
CONFIG_DIR=${AGENT_COLLECTOR_CONFIG_DIR:-$default_config}
export AGENT_COLLECTOR_DATA_DIR="$DATA_DIR" AGENT_COLLECTOR_CONFIG_DIR="$CONFIG_DIR"
VENV="$DATA_DIR/venv"
SHARE="$VENV/share/agent-collector"
BIN="$VENV/bin/agent-collector"
LABEL=io.agent-collector.daemon
USER_BIN="$HOME/.local/bin"
LINK="$USER_BIN/agent-collector"
