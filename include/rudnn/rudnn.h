/* rudnn: portable neural-network operators. Umbrella header. */
#ifndef RUDNN_H
#define RUDNN_H

#include "rudnn/version.h"
#include "rudnn/export.h"
#include "rudnn/status.h"
#include "rudnn/dtype.h"
#include "rudnn/core.h"
#include "rudnn/norm.h"
#include "rudnn/moe.h"

#endif
