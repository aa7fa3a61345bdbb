// Includes a higher folder: the check must refuse this.
#pragma once

#include "high/high.h"
