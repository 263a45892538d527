// SPDX-License-Identifier: BSD-3-Clause
import './style.css';
document.getElementById('app').textContent = 'kinetoscope';
