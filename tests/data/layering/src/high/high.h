// May include low.
#pragma once

#include "low/low.h"
