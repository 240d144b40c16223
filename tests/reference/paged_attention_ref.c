/* Placeholder: the paged-attention reference is being written. */
#include "rudnn/paged_attention.h"
